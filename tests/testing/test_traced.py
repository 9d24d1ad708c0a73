"""`traced` counts the calling thread's allocations: other threads' event loops wait."""

import asyncio
import threading
import time
import tracemalloc
import weakref

from daskhpc.testing import traced


def _allocating_loop():
    """A loop in its own thread that allocates 1 MB at every turn and counts its turns."""
    loop = asyncio.new_event_loop()
    state = {"turns": 0, "allocated": threading.Event()}

    def turn():
        junk = bytearray(1 << 20)
        state["turns"] += 1
        state["allocated"].set()
        del junk
        loop.call_later(0.001, turn)

    loop.call_soon(turn)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    return loop, thread, state


def test_other_loops_are_paused_while_traced():
    loop, thread, state = _allocating_loop()
    try:
        tracemalloc.start()                      # untraced by the helper: counted
        try:
            state["allocated"].clear()
            assert state["allocated"].wait(60)
            seen = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert seen >= 1 << 20, seen
        with traced() as t:
            before = state["turns"]
            time.sleep(0.2)
            after = state["turns"]
        assert after == before                   # the loop did not turn
        assert t.peak < 1 << 18, t.peak
        state["allocated"].clear()
        assert state["allocated"].wait(60)       # and it runs again afterwards
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_dead_weak_proxy_does_not_stop_it():
    class Gone:
        pass

    proxy = weakref.proxy(Gone())              # its referent is gone at once
    with traced() as t:
        a = bytearray(1 << 16)
    assert t.peak >= len(a) and proxy is not None
