"""The messages room: SendMessage and SendStreamingMessage, their answers and their retries.

A message starts (or continues) an execution (see ``executions``; on a
queued agent, on a worker: see ``queued``) and its request waits for the
answer: a direct Message, or the task once it settles, or the stream of
its events. A message whose client lost the answer is recognised when it
comes again (see ``retries``) and answered from what the first one started.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..protocol import (
    PROTOCOL_VERSION,
    A2AError,
    InternalError,
    InvalidParamsError,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    StorageFullError,
    StreamResponse,
    Task,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from ..store import Receipt, ReceiptWrite, StoredTask
from .cluster import new_token
from .executions import Executions
from .executor import Principal, RequestContext
from .feed import FeedItem
from .operations import Operations
from .queued import QueuedExecutions
from .recorder import Recorder
from .retries import Retries
from .state import Execution, HostState, LiveTask, RetryKey, TaskRead
from .streams import TaskEventStream

__all__ = ["CREDENTIALS_KEY", "Messages", "new_id"]

log = logging.getLogger("a2a_trio.runtime")


# Not frozen, as the records of a round are not: made for each request (see store.rounds).
@dataclass(slots=True)
class Admission:
    """A SendMessage as it asks to be admitted: what each step of the admission reads."""

    request: SendMessageRequest
    caller: Principal
    extensions: frozenset[str]
    retry_key: RetryKey | None
    protocol: str = PROTOCOL_VERSION
    #: SendStreamingMessage: the execution waits for the stream to take its message.
    streaming: bool = False


class Messages:
    """One agent's messages: each starts or continues an execution, then waits for its answer."""

    def __init__(
        self,
        state: HostState,
        *,
        operations: Operations,
        executions: Executions,
        recorder: Recorder,
        retries: Retries,
        queued: QueuedExecutions | None,
    ) -> None:
        self.state = state
        self.name = state.name
        self._operations = operations
        self._executions = executions
        self._recorder = recorder
        self._retries = retries
        #: A queued agent's executions (see runtime.queued), else None.
        self._queued = queued

    @property
    def runs_elsewhere(self) -> bool:
        """Whether executions run on worker processes (a queued agent, with a cluster)."""
        return self._queued is not None and self.state.cluster is not None

    def _in_background(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Store what a caller who went away cannot wait for (a receipt, say)."""
        nursery = self.state.nursery
        if nursery is None:  # the host has stopped: a retry costs new work, no more
            log.warning("agent %s stopped before %s could run", self.name, fn.__name__)
            return
        nursery.start_soon(fn, *args)

    def _unanswered(self, execution: Execution) -> None:
        """The request went away without its answer: keep what a retry needs."""
        receipt = self._retries.unanswered(execution)
        if receipt is not None:
            self._in_background(self._keep_receipt, execution.context.task_id, receipt)

    def _answered(self, execution: Execution) -> None:
        """A client has the answer: drop the receipt kept for a retry, if one was."""
        stored = self._retries.answered(execution)
        if stored is not None:
            self._in_background(self._drop_receipt, stored)

    async def _drop_receipt(self, receipt: ReceiptWrite) -> None:
        try:
            await self._recorder.drop_receipt(receipt)
        except Exception:  # the receipt stays: the next copy is taken for a retry too
            log.exception("agent %s: could not drop a message receipt", self.name)
        finally:
            self._retries.dropped(receipt)

    async def _keep_receipt(self, task_id: str, receipt: ReceiptWrite) -> None:
        try:
            await self._recorder.keep_receipt(task_id, receipt)
        except Exception:  # a failing store costs a retry its answer, nothing more
            log.exception("agent %s: could not store a message receipt", self.name)

    # --- SendMessage ------------------------------------------------------------

    async def _begin(self, admission: Admission) -> tuple[LiveTask, Execution]:
        message = admission.request.message
        if admission.retry_key is not None:
            joined = self._retries.join(admission.retry_key, message)
            if joined is not None:
                return joined
        # A continuation's task is read once, here, while nothing writes it meanwhile.
        read = self.state.live.reading(message.task_id) if message.task_id else None
        try:
            return await self._start(admission, read)
        finally:
            if read is not None:
                self.state.live.read_done(read)

    async def _start(
        self, admission: Admission, read: TaskRead | None
    ) -> tuple[LiveTask, Execution]:
        message = admission.request.message
        stored: StoredTask | None = None
        lease: str | None = None
        try:
            if message.task_id:
                stored, lease = await self._read_continued(message.task_id, admission.caller)
            return await self._started(admission, read, stored, lease)
        except BaseException:
            if lease is not None and stored is not None and self.state.cluster is not None:
                self.state.cluster.release(lease)  # held for an execution that did not start
                self.state.live.unclaim(stored.task.id)
            raise

    async def _read_continued(
        self, task_id: str, caller: Principal
    ) -> tuple[StoredTask, str | None]:
        """A continuation's task, with its lease when that can be had in the same read.

        Several processes (inline agents): the lease (one execution of the task
        at a time, anywhere) is taken with the request's read when nobody
        holds it, the task is the caller's and open, and no other continuation
        of the task here has claimed its turn (see LiveTasks.claim): the
        execution then needs no write of its own before its executor runs
        (see Executions._resume). Returns the lease's token, if taken (the
        turn is then claimed too).
        """
        cluster = self.state.cluster
        if cluster is None or self.runs_elsewhere or not self.state.live.claim_nowait(task_id):
            return await self._operations.owned(task_id, caller), None
        token = new_token()
        try:
            stored, leased = await self.state.store.get_task_leased(
                self.name, task_id, owner=caller.identifier, lease=(cluster.member, token)
            )
        except BaseException:
            cluster.release(token)  # its insert may have run
            self.state.live.unclaim(task_id)
            raise
        if not leased:
            self.state.live.unclaim(task_id)
        if stored is None:
            raise TaskNotFoundError(f"Task {task_id} not found", metadata={"taskId": task_id})
        return stored, token if leased else None

    async def _started(
        self,
        admission: Admission,
        read: TaskRead | None,
        stored: StoredTask | None,
        lease: str | None,
    ) -> tuple[LiveTask, Execution]:
        request, caller, retry_key = admission.request, admission.caller, admission.retry_key
        message = request.message
        if stored is not None:
            if stored.state.is_final:
                raise UnsupportedOperationError(
                    f"Task {stored.task.id} is {stored.state.value} and accepts no more messages",
                    metadata={"taskId": stored.task.id, "state": stored.state.value},
                )
            if message.context_id and message.context_id != stored.task.context_id:
                raise InvalidParamsError(
                    "message.contextId: does not match the context of task " + stored.task.id
                )
            task_id = stored.task.id
            context_id = stored.task.context_id or message.context_id or new_id()
        else:
            task_id = new_id()
            context_id = message.context_id or new_id()
        message, credentials = _without_credentials(message)
        message = message.model_copy(update={"task_id": task_id, "context_id": context_id})
        request_metadata = dict(request.metadata or {})
        if CREDENTIALS_KEY in request_metadata:
            credentials = request_metadata.pop(CREDENTIALS_KEY)
        context = RequestContext(
            task_id=task_id,
            context_id=context_id,
            message=message,
            current_task=stored.task if stored else None,
            caller=caller,
            configuration=request.configuration,
            metadata=request_metadata,
            requested_extensions=admission.extensions,
            credentials=credentials,
            history_reader=self._executions.history_reader(task_id),
        )
        if request.configuration and request.configuration.task_push_notification_config:
            await self._operations.screen_webhook(
                request.configuration.task_push_notification_config
            )
        execution = Execution(
            context,
            continuing=stored is not None,
            retry_key=retry_key,
            retry_message=request.message if retry_key is not None else None,
            protocol=admission.protocol,
            # Still the task as it is (nothing here wrote it since): from now
            # on its live task, held, sees every write (see Executions._resume).
            read=stored if read is not None and not read.moved else None,
            lease_token=lease,
            lease_held=lease is not None,
            claimed=lease is not None,
            await_message=admission.streaming,
        )
        live = self.state.live.acquire(task_id, stored, written_here=not self.runs_elsewhere)
        try:
            if self.runs_elsewhere:
                self.state.accepting()  # refused while shutting down
                assert self._queued is not None
                await self._queued.enqueue(live, execution, stored)
            else:
                self._executions.start(live, execution)
        except BaseException:
            self.state.live.release(live)
            raise
        return live, execution

    async def send_message(
        self,
        request: SendMessageRequest,
        caller: Principal,
        extensions: frozenset[str] = frozenset(),
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> Task | Message:
        """SendMessage: a Message answer, or the task once it settles.

        Blocking (the default) waits for a final or interrupted state, or for
        the execution to end; ``returnImmediately`` answers once the task exists.
        ``protocol`` is the version the caller speaks (see :meth:`create_push_config`).
        """
        retry_key = None if self.runs_elsewhere else self._retries.key(request, caller)
        earlier = await self._retries.earlier(retry_key, request.message)
        if earlier is not None:
            answer = await self._answer_again(earlier.receipt, request, caller)
            await self._retries.answered_again(earlier)
            return answer
        admission = Admission(request, caller, extensions, retry_key, protocol)
        live, execution = await self._begin(admission)
        try:
            answer = await self._await_answer(live, execution, request.configuration)
        except A2AError:
            self._answered(execution)  # the client gets this error as its answer
            raise
        except BaseException:
            self._unanswered(execution)
            raise
        finally:
            self.state.live.release(live)
        self._answered(execution)
        return answer

    async def _await_answer(
        self,
        live: LiveTask,
        execution: Execution,
        configuration: SendMessageConfiguration | None,
    ) -> Task | Message:
        await execution.first.wait()
        if execution.error is not None:
            raise execution.error
        if execution.answer is not None:
            return execution.answer
        if not (configuration and configuration.return_immediately):
            # Settled means final or interrupted by an event of this execution:
            # a continued INPUT_REQUIRED task is not settled by its old state.
            while live.feed.settled_seq <= execution.start_seq and not self._execution_over(
                live, execution
            ):
                await live.feed.wakeup.wait()
            if live.feed.settled_seq <= execution.start_seq and isinstance(
                execution.error, StorageFullError
            ):
                raise execution.error  # its progress could not be stored: retry for the task
        # The task exists once published (direct push mode publishes late).
        while live.feed.snapshot is None and not execution.done.is_set():
            await live.feed.wakeup.wait()
        snapshot = live.feed.snapshot
        if snapshot is None:
            raise execution.error or InternalError()
        history_length = configuration.history_length if configuration else None
        return await self._operations.shown(
            snapshot, history_length, through=live.feed.last_seq, live=live
        )

    def _execution_over(self, live: LiveTask, execution: Execution) -> bool:
        """Whether a waiter has all it will get: the execution is done and its task's
        ending recorded (see :attr:`LiveTask.left_running`), or the host has stopped."""
        if not execution.done.is_set():
            return False
        return not live.left_running or self.state.finished.is_set()

    async def stream_message(
        self,
        request: SendMessageRequest,
        caller: Principal,
        extensions: frozenset[str] = frozenset(),
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> TaskEventStream:
        """SendStreamingMessage: the stream of this message's events.

        Errors (unknown task, final task, bad request) are raised here, before
        any event, so bindings can answer them as plain errors.
        """
        self._operations.require_streaming()
        retry_key = None if self.runs_elsewhere else self._retries.key(request, caller)
        earlier = await self._retries.earlier(retry_key, request.message)
        if earlier is not None:
            stream = await self._stream_again(earlier.receipt, caller)
            again = earlier

            def closed(finished: bool) -> None:
                if finished:
                    self._in_background(self._retries.answered_again, again)

            stream.on_close(closed)
            return stream
        admission = Admission(request, caller, extensions, retry_key, protocol, streaming=True)
        live, execution = await self._begin(admission)
        try:
            await execution.first.wait()
        except BaseException:
            self._unanswered(execution)
            self.state.live.release(live)
            raise
        try:
            if execution.error is not None:
                self._answered(execution)
                raise execution.error
            if execution.answer is not None:
                self._answered(execution)
                return TaskEventStream.single(StreamResponse(message=execution.answer))
            initial: list[FeedItem] = []
            if execution.continuing:
                assert execution.start_snapshot is not None
                configuration = request.configuration
                task = await self._operations.shown(
                    execution.start_snapshot,
                    configuration.history_length if configuration else None,
                    through=execution.start_seq,
                    live=live,
                )
                initial.append((execution.start_seq, StreamResponse(task=task), None))
            # The stream holds the task from the start (it is read at once): its
            # events are in the feed, not only in the store, when it reads them.
            stream = TaskEventStream(
                self.state,
                live.task_id,
                execution.start_seq,
                initial,
                execution=execution,
                live=live,
            )
            stream.on_close(
                lambda finished: (
                    self._answered(execution) if finished else self._unanswered(execution)
                )
            )
            return stream
        finally:
            self.state.live.release(live)

    async def _answer_again(
        self, earlier: Receipt, request: SendMessageRequest, caller: Principal
    ) -> Task | Message:
        """A retried SendMessage: the original answer, or the task as it is now."""
        if earlier.answer is not None:
            return Message.model_validate_json(earlier.answer)
        assert earlier.task_id is not None
        stored = await self._operations.owned(earlier.task_id, caller)
        live = self.state.live.tasks.get(earlier.task_id)
        task, seq = stored.task, stored.last_seq
        if live is not None and live.feed.snapshot is not None:
            task, seq = live.feed.snapshot, live.feed.last_seq
        configuration = request.configuration
        history_length = configuration.history_length if configuration else None
        return await self._operations.shown(task, history_length, through=seq)

    async def _stream_again(self, earlier: Receipt, caller: Principal) -> TaskEventStream:
        """A retried SendStreamingMessage: the original stream, replayed from the log."""
        if earlier.answer is not None:
            answer = Message.model_validate_json(earlier.answer)
            return TaskEventStream.single(StreamResponse(message=answer))
        assert earlier.task_id is not None
        stored = await self._operations.owned(earlier.task_id, caller)
        if earlier.seq == 0:  # a new task: its log from the first event
            return TaskEventStream(self.state, stored.task.id, 0, [])
        # A continuation: the task as it is now, then on to its next settled state.
        live = self.state.live.tasks.get(stored.task.id)
        snapshot, cursor = stored.task, stored.last_seq
        if live is not None and live.feed.snapshot is not None:
            snapshot, cursor = live.feed.snapshot, live.feed.last_seq
        snapshot = await self._operations.shown(snapshot, None, through=cursor)
        return TaskEventStream(
            self.state, stored.task.id, cursor, [(cursor, StreamResponse(task=snapshot), None)]
        )


#: The metadata key that carries in-band credentials (spec 7.6); never stored.
CREDENTIALS_KEY = "credentials"


def _without_credentials(message: Message) -> tuple[Message, object]:
    metadata = message.metadata
    if not metadata or CREDENTIALS_KEY not in metadata:
        return message, None
    remaining = {k: v for k, v in metadata.items() if k != CREDENTIALS_KEY}
    return message.model_copy(update={"metadata": remaining or None}), metadata[CREDENTIALS_KEY]


def new_id() -> str:
    """A new task or context id: a UUID of version 7 (RFC 9562), ordered by time.

    The store's keys and indexes start with these ids; ids in time order put
    each new task's rows next to the last ones instead of on a random page,
    so a commit, and the checkpoint after it, write fewer distinct pages.
    """
    millis = time.time_ns() // 1_000_000
    value = (millis & 0xFFFF_FFFF_FFFF) << 80 | int.from_bytes(os.urandom(10), "big")
    value = value & ~(0xF << 76) | 0x7 << 76  # version 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # RFC 9562 variant
    text = f"{value:032x}"  # uuid.UUID's own str(), without building the object
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
