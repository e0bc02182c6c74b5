"""The outbox caps: past them, the oldest pending notifications stay, newer ones are dead letters.

Every backend (the ``database`` fixture), filled directly as the recorder would.
"""

from __future__ import annotations

from a2a_trio.store import Store
from a2a_trio.store.outbox_caps import OutboxCaps

from .postgres import opened_store
from .store_contract import make_task, push_config
from .writes import AGENT, ALICE, artifact_event, create, following, record, status_event


async def states(store: Store, task_id: str = "t-1") -> list[tuple[int, str, str, str | None]]:
    return [
        (d.seq, d.config_id, d.state, d.last_error) for d in await store.deliveries(AGENT, task_id)
    ]


async def test_past_a_webhooks_cap_newer_notifications_are_dead_letters(database: str) -> None:
    async with opened_store(database) as store:
        store.outbox_caps = OutboxCaps(per_webhook=2, per_task=100)
        task = make_task("t-1")
        await create(store, task, push_config=push_config(), push=True)
        events = [status_event(2, task), artifact_event(3, task), status_event(4, task)]
        await record(store, following("t-1", *events), push=True)
        found = await states(store)
    assert [(seq, state) for seq, _, state, _ in found] == [
        (1, "pending"),
        (2, "pending"),
        (3, "failed"),
        (4, "failed"),
    ]
    reason = found[2][3]
    assert reason is not None and "2 notifications of this webhook" in reason
    assert "push.max_pending_per_webhook" in reason


async def test_a_delivered_notification_makes_room_under_the_cap(database: str) -> None:
    async with opened_store(database) as store:
        store.outbox_caps = OutboxCaps(per_webhook=1, per_task=100)
        task = make_task("t-1")
        await create(store, task, push_config=push_config(), push=True)
        [lane] = await store.pending_lanes()
        first = await store.next_notification(lane)
        assert first is not None
        await store.record_attempt(
            first, outcome="delivered", status=200, error=None, duration_ms=1.0
        )
        await record(store, following("t-1", status_event(2, task)), push=True)
        found = await states(store)
    assert [(seq, state) for seq, _, state, _ in found] == [(1, "delivered"), (2, "pending")]


async def test_the_task_cap_counts_every_webhook_of_the_task(database: str) -> None:
    async with opened_store(database) as store:
        store.outbox_caps = OutboxCaps(per_webhook=100, per_task=3)
        task = make_task("t-1")
        await create(store, task, push_config=push_config("c-1"), push=True)
        await store.save_push_config(AGENT, ALICE, push_config("c-2"))
        events = [status_event(2, task), artifact_event(3, task)]
        await record(store, following("t-1", *events), push=True)
        found = await states(store)
    kept = [(seq, config) for seq, config, state, _ in found if state == "pending"]
    dead = [(seq, config, error) for seq, config, state, error in found if state == "failed"]
    assert kept == [(1, "c-1"), (2, "c-1"), (2, "c-2")]
    assert [(seq, config) for seq, config, _ in dead] == [(3, "c-1"), (3, "c-2")]
    assert all(error and "push.max_pending_per_task" in error for _, _, error in dead)


async def test_one_noisy_webhook_does_not_push_out_another_webhooks_notifications(
    database: str,
) -> None:
    async with opened_store(database) as store:
        store.outbox_caps = OutboxCaps(per_webhook=1, per_task=2)
        task = make_task("t-1")
        await create(store, task, push_config=push_config("c-1"), push=True)
        await record(store, following("t-1", status_event(2, task)), push=True)
        await store.save_push_config(AGENT, ALICE, push_config("c-2"))
        await record(store, following("t-1", status_event(3, task)), push=True)
        found = await states(store)
    pending = [(seq, config) for seq, config, state, _ in found if state == "pending"]
    assert pending == [(1, "c-1"), (3, "c-2")]
