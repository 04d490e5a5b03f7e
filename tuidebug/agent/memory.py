"""Memory readings of the training process: RSS always, the CUDA allocator and NVML on a GPU.

Read on the agent's writer thread about once a second, never on the training thread. CUDA figures
are read only once the script itself has initialised CUDA: tuidebug never initialises it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import time

import psutil
import torch

from tuidebug.protocol import Device, Memory


_PROCESS = psutil.Process()
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _Statm:
    """/proc/self/statm kept open and read with one pread (about 1 us, against psutil's 18 us). Reopened
    in a forked process: the open file still names the parent's."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._pid = 0

    def read(self) -> tuple[int, int] | None:
        """(resident, address space) in bytes, or None where /proc is not there."""
        try:
            if self._pid != os.getpid():
                self._fd, self._pid = os.open("/proc/self/statm", os.O_RDONLY), os.getpid()
            size, resident = os.pread(self._fd, 128, 0).split()[:2]
        except (OSError, ValueError):
            return None
        return int(resident) * _PAGE_BYTES, int(size) * _PAGE_BYTES


_STATM = _Statm()


def process_memory() -> tuple[int, int]:
    """This process's resident memory and address space in bytes (about 1 us on Linux: read at step ends)."""
    read = _STATM.read()
    if read is not None:
        return read
    info = _PROCESS.memory_info()
    return info.rss, info.vms


def release_free_heap() -> bool:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``), so that resident memory
    shows what the process holds rather than what its allocator keeps for reuse. Only free memory goes:
    nothing the script holds changes. False where there is no glibc (macOS, musl)."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


_LIBC = _libc()
M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8  # glibc's mallopt parameters
LARGE_BLOCK = 1 << 20


def under_address_cap() -> bool:
    """Whether the process runs under an address-space limit (RLIMIT_AS), where what the allocator keeps counts."""
    return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY


def _mallopt_under_cap(parameter: int, value: int) -> None:
    """glibc's mallopt, under an address-space cap only (elsewhere, or without glibc, nothing to adjust)."""
    if _LIBC is not None and hasattr(_LIBC, "mallopt") and under_address_cap():
        _LIBC.mallopt(parameter, value)


def one_heap() -> None:
    """Under an address-space cap: one malloc heap for all threads. glibc reserves a 64 MiB heap for each thread
    that allocates, so the agent's own threads would eat the room the script has."""
    _mallopt_under_cap(M_ARENA_MAX, 1)


def return_large_blocks() -> None:
    """Under an address-space cap: blocks of LARGE_BLOCK or more mapped and unmapped, so that address space used
    once (by a probe, a checkpoint, the failing step) is given back; glibc's dynamic threshold keeps freed large
    blocks in its heap instead. Set from the start: setting it only at the end of the first step let that step
    run as it does bare (two corpus cases that fail bare at step 1 then failed under tuidebug too), but the heap
    it left made a leak case's failure come one call earlier or not, from run to run (r35cmem: 2 misses in 6)."""
    _mallopt_under_cap(M_MMAP_THRESHOLD, LARGE_BLOCK)


class MemoryReader:
    def __init__(self) -> None:
        self._process = psutil.Process()
        self._nvml_handle = None
        self._nvml_failed = False
        self._device_sent: str | None = None
        self._process.cpu_percent()  # the first reading only starts psutil's interval

    def read(self) -> list:
        """The current Memory reading, preceded by a Device message when the device changed."""
        messages = []
        cuda = torch.cuda.is_initialized()
        device = self._device(cuda)
        if device.kind != self._device_sent:
            self._device_sent = device.kind
            messages.append(device)
        reading = Memory(time=time.time(), rss=self._process.memory_info().rss, cpu_percent=self._process.cpu_percent())
        if cuda:
            index = torch.cuda.current_device()
            reading.cuda_allocated = torch.cuda.memory_allocated(index)
            reading.cuda_reserved = torch.cuda.memory_reserved(index)
            reading.cuda_peak = torch.cuda.max_memory_allocated(index)
            handle = self._nvml(index)
            if handle is not None:
                info = _nvml_memory(handle)
                if info is not None:
                    reading.nvml_used, reading.nvml_total = info
                reading.gpu_percent = _nvml_utilisation(handle)
        messages.append(reading)
        return messages

    def _device(self, cuda: bool) -> Device:
        if cuda:
            index = torch.cuda.current_device()
            props = torch.cuda.get_device_properties(index)
            return Device(kind="cuda", name=f"cuda:{index} {props.name}", total_bytes=props.total_memory)
        name = platform.processor() or platform.machine() or "unknown"
        return Device(kind="cpu", name=f"CPU ({name}, {psutil.cpu_count()} cores)",
                      total_bytes=psutil.virtual_memory().total)

    def _nvml(self, index: int):
        """The NVML handle of the process's current GPU, found by UUID (CUDA_VISIBLE_DEVICES renumbers)."""
        if self._nvml_handle is not None or self._nvml_failed:
            return self._nvml_handle
        try:
            import pynvml

            pynvml.nvmlInit()
            uuid = str(torch.cuda.get_device_properties(index).uuid)
            if not uuid.startswith("GPU-"):
                uuid = "GPU-" + uuid
            self._nvml_handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:  # no driver, no library, MIG or a renamed UUID: NVML figures stay empty
            self._nvml_failed = True
        return self._nvml_handle


def _nvml_memory(handle) -> tuple[int, int] | None:
    try:
        import pynvml

        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.used), int(info.total)
    except Exception:
        return None


def _nvml_utilisation(handle) -> int | None:
    """The share of the last sample period in which a kernel ran on the GPU, in percent."""
    try:
        import pynvml

        return int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except Exception:
        return None
