"""Fair webhook delivery: a host that hangs delays no other host.

A real receiver that accepts connections and never answers stands for the
hanging webhook; a real one that answers at once for the healthy one
(tests/webhooks.py). Each host gets at most ``push.per_host`` of the
``push.concurrency`` slots, and a host that leaves attempts unanswered
``breaker_threshold`` times in a row waits out ``breaker_cooldown``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing

from a2a_trio.push import PushSettings
from a2a_trio.push.hosts import HostGate

from .test_push_delivery import LOOPBACK, push_server, send, webhook
from .webhooks import webhook_receiver

#: The issue's load: 2,000 tasks with a hanging webhook against 16 slots. Here
#: the same ratio, 125 tasks a slot, with fewer tasks: 250 against 2 slots.
HANGING_TASKS = 250
FAIR = PushSettings(allowed_hosts=LOOPBACK, concurrency=2, per_host=1, timeout=5.0)
#: The acceptance bound on the healthy webhook's delivery (real seconds).
HEALTHY_WITHIN = 5.0


class HangingReceiver:
    """Accepts every connection, reads what comes, never answers."""

    def __init__(self) -> None:
        self.url = ""
        self.connections = 0
        self.changed = trio.Event()

    async def hold(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        self.changed.set()
        self.changed = trio.Event()
        async with stream:
            while await stream.receive_some(65536):
                pass

    async def wait_connections(self, count: int) -> None:
        while self.connections < count:
            await self.changed.wait()


@asynccontextmanager
async def hanging_receiver() -> AsyncIterator[HangingReceiver]:
    receiver = HangingReceiver()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, host="127.0.0.1"), receiver.hold, 0)
        [listener] = listeners
        host, port = listener.socket.getsockname()[:2]
        receiver.url = f"http://{host}:{port}/hook"
        try:
            yield receiver
        finally:
            nursery.cancel_scope.cancel()


# Serial (noxfile.py): a bound in real seconds with hundreds of tasks under way,
# which four workers' servers beside it on two cores would crowd out.
@pytest.mark.serial
async def test_a_healthy_webhook_is_delivered_while_hundreds_of_tasks_hang_on_another(
    tmp_path: Path, database: str
) -> None:
    async with (
        hanging_receiver() as hanging,
        webhook_receiver() as healthy,
        push_server(tmp_path, FAIR, database=database) as server,
    ):

        async def hang(numbers: trio.MemoryReceiveChannel[int]) -> None:
            async for _ in numbers:
                await send(server, "echo hello", config=webhook(hanging.url))

        send_numbers, numbers = trio.open_memory_channel[int](math.inf)
        for number in range(HANGING_TASKS):
            send_numbers.send_nowait(number)
        send_numbers.close()
        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(hang, numbers.clone())
        # The hanging host holds its slot: its attempts are under way.
        with trio.fail_after(10):
            await hanging.wait_connections(1)
        began = trio.current_time()
        await send(server, "echo hello", config=webhook(healthy.url))
        with trio.fail_after(60):
            await healthy.wait_answered(4)
        took = trio.current_time() - began
    assert took < HEALTHY_WITHIN, f"the healthy webhook waited {took:.1f} s"


# --- the circuit breaker, on trio's clock -----------------------------------------------

HOST = ("http", "hook.example", 80)
OTHER = ("http", "other.example", 80)


async def test_a_host_unanswered_threshold_times_waits_out_the_cooldown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = HostGate(per_host=2, threshold=3, cooldown=30.0)
    for _ in range(2):
        gate.unanswered(HOST)
    assert gate.open_hosts() == {}
    gate.unanswered(HOST)
    assert list(gate.open_hosts()) == ["http://hook.example:80"]
    began = trio.current_time()
    async with gate.turn(OTHER):  # another host goes on at once
        assert trio.current_time() == began
    async with gate.turn(HOST):
        assert trio.current_time() - began == pytest.approx(30.0)


async def test_an_answer_closes_the_circuit_and_wakes_the_waiting_attempts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = HostGate(per_host=1, threshold=1, cooldown=30.0)
    gate.unanswered(HOST)
    began = trio.current_time()
    admitted: list[float] = []

    async def attempt() -> None:
        async with gate.turn(HOST):
            admitted.append(trio.current_time() - began)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(attempt)
        await trio.sleep(5)
        gate.answered(HOST)
    assert admitted == [pytest.approx(5.0)]
    assert gate.open_hosts() == {}


async def test_a_probe_left_unanswered_after_the_cooldown_opens_the_circuit_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = HostGate(per_host=1, threshold=2, cooldown=10.0)
    gate.unanswered(HOST)
    gate.unanswered(HOST)
    await trio.sleep(10)
    assert gate.open_hosts() == {}
    gate.unanswered(HOST)  # the first attempt after the cool-down: no answer again
    assert list(gate.open_hosts()) == ["http://hook.example:80"]


async def test_attempts_to_one_host_are_at_most_per_host_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = HostGate(per_host=2, threshold=5, cooldown=30.0)
    inside = most = 0

    async def attempt() -> None:
        nonlocal inside, most
        async with gate.turn(HOST):
            inside += 1
            most = max(most, inside)
            await trio.sleep(1)
            inside -= 1

    async with trio.open_nursery() as nursery:
        for _ in range(6):
            nursery.start_soon(attempt)
    assert most == 2
    assert trio.current_time() == pytest.approx(3.0)


async def test_a_hanging_host_stops_getting_attempts_once_its_circuit_opens(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = PushSettings(
        allowed_hosts=LOOPBACK,
        timeout=5.0,
        per_host=1,
        breaker_threshold=2,
        breaker_cooldown=600.0,
        max_attempts=10,
    )
    async with (
        hanging_receiver() as hanging,
        push_server(tmp_path, settings, on_trio_clock=True) as server,
    ):
        for _ in range(3):
            await send(server, "echo hello", config=webhook(hanging.url))
        with trio.fail_after(30):
            await hanging.wait_connections(2)
        await trio.sleep(settings.timeout + 1)  # the second attempt times out too
        assert list(server.app.push.hosts.open_hosts())
        await trio.sleep(300)  # half the cool-down: not one attempt more
        assert hanging.connections == 2
        deliveries = await server.app.store.deliveries()
        assert sum(d.attempts_made for d in deliveries) == 2


async def test_direct_delivery_leaves_a_waiting_host_to_the_worker(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    settings = PushSettings(
        allowed_hosts=LOOPBACK, queue=False, breaker_threshold=1, breaker_cooldown=600.0
    )
    async with (
        hanging_receiver() as hanging,
        push_server(tmp_path, settings, on_trio_clock=True) as server,
    ):
        port = int(hanging.url.split(":")[2].split("/")[0])
        server.app.push.hosts.unanswered(("http", "127.0.0.1", port))
        began = trio.current_time()
        task = await send(server, "echo hello", config=webhook(hanging.url))
        took = trio.current_time() - began
        deliveries = await server.app.store.deliveries(task_id=task["id"])
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert took < settings.breaker_cooldown
    assert hanging.connections == 0
    assert [d.state for d in deliveries] == ["pending"] * 4
