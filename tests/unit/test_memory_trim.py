"""The memory of a surge of calls goes back when the surge ends
(:class:`vehicle_middleware.server.memory_trim.MemoryTrim`): when, and only then."""

from __future__ import annotations

from vehicle_middleware.server.memory_trim import MemoryTrim, malloc_trim


async def _counts(give_back: MemoryTrim, *counts: int) -> None:
    for count in counts:
        give_back.calls(count)
        if give_back.running is not None:
            await give_back.running  # the trim runs in a worker thread: it is done


async def test_the_end_of_a_surge_trims_once() -> None:
    trims: list[int] = []
    give_back = MemoryTrim(lambda: trims.append(1), surge=100)
    await _counts(give_back, *range(1, 301), *range(299, -1, -1))
    assert trims == [1]
    assert give_back.trims == 1


async def test_a_steady_load_or_a_small_surge_never_trims() -> None:
    trims: list[int] = []
    give_back = MemoryTrim(lambda: trims.append(1), surge=100)
    for _ in range(50):  # calls come and go around 60 in progress
        await _counts(give_back, 60, 59, 61, 60)
    await _counts(give_back, *range(60, 150), *range(150, 40, -1))  # a quarter not reached
    assert trims == []


async def test_each_new_surge_trims_again() -> None:
    trims: list[int] = []
    give_back = MemoryTrim(lambda: trims.append(1), surge=10)
    for _ in range(3):
        await _counts(give_back, *range(1, 41), *range(40, 0, -1))
    assert len(trims) == 3


def test_glibc_has_malloc_trim_and_it_runs() -> None:
    trim = malloc_trim()
    assert trim is not None  # this project's machines run glibc
    trim()
