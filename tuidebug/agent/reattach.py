"""A run outlives its screen and takes a new one: the training process's side of ``tuidebug attach``.

The run is listed in this user's runs folder (``tuidebug/runs.py``) while it lives. When the screen
goes away, a small thread watches for an attach request and connects the agent to the new screen;
until then the agent keeps training, with its history kept for the next screen (agent/client.py).
"""

from __future__ import annotations

import atexit
import os
import threading
import time

from tuidebug import runs
from tuidebug.agent.client import AgentClient, ConnectionRefused

POLL_SECONDS = 0.5  # a stat of one file twice a second while nobody watches: how long attach waits at most


class Reattach:
    def __init__(self, client: AgentClient, script: str, args: list[str]) -> None:
        self.client = client
        self.record = runs.RunRecord(pid=os.getpid(), script=script, args=args, cwd=os.getcwd(),
                                     started=time.time(), since=time.time())
        self._watcher: threading.Thread | None = None

    def enable(self) -> None:
        """List the run, and take a new screen whenever the connection to the current one ends."""
        self.client.reattachable = True
        self.client.on_disconnect = self._detached
        self._save(watched=True)
        atexit.register(self.disable)

    def disable(self) -> None:
        """The script is over: nobody can attach any more."""
        self.client.reattachable = False
        runs.remove(self.record.pid)

    def _detached(self) -> None:
        if not self.client.reattachable or os.getpid() != self.record.pid:  # a forked worker is not the run
            return
        self._save(watched=False)
        if self._watcher is None or not self._watcher.is_alive():
            self._watcher = threading.Thread(target=self._watch, name="tuidebug-reattach", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        while self.client.reattachable and not self.client.connected:
            request = runs.take_attach_request(self.record.pid)
            if request is not None:
                try:
                    self.client.reconnect(*request)
                except ConnectionRefused:
                    continue  # that screen is gone already: wait for the next request
                self._save(watched=True)
                return
            time.sleep(POLL_SECONDS)

    def _save(self, watched: bool) -> None:
        self.record.watched, self.record.since = watched, time.time()
        try:
            runs.save(self.record)
        except OSError:  # a full or read-only home: the run trains on, it just cannot be listed
            pass
