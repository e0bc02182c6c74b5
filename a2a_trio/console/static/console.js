// The a2a-trio operator console: plain DOM, no build step, no third-party code.
// Data comes from the console's JSON endpoints and its live feed, with the
// token from the page's fragment (#token=...), which browsers never send.
"use strict";
(function () {
  const base = location.pathname.replace(/\/console\/?$/, "");
  const FINAL = new Set(["COMPLETED", "FAILED", "CANCELED", "REJECTED"]);
  const MAX_ROWS = 200;        // rows the task list keeps (older ones page in on demand)
  const FLUSH_MS = 250;        // feed events are applied in batches, at most 4 a second
  let token = new URLSearchParams(location.hash.slice(1)).get("token") || sessionStorage.getItem("a2a-console-token");
  let selected = null;         // {agent, id} of the task shown
  let nextTasks = "";
  let pending = [];            // feed events waiting for the next flush
  let lastSeq = null, epoch = null, retry = 0;
  const $ = (id) => document.getElementById(id);
  const short = (state) => (state || "").replace(/^TASK_STATE_/, "");

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function banner(text) {
    $("banner").textContent = text;
    $("banner").hidden = !text;
  }

  async function api(path, options) {
    const response = await fetch(base + "/api" + path, {
      ...(options || {}),
      headers: { Authorization: "Bearer " + token },
    });
    if (response.status === 401) {
      sessionStorage.removeItem("a2a-console-token");
      banner("401: the console token was refused. Open the console with its URL (…/console#token=…).");
      $("main").hidden = true;
      $("login").hidden = false;
      throw new Error("unauthorized");
    }
    const body = await response.json();
    if (!response.ok) throw new Error((body.error && body.error.message) || response.statusText);
    return body;
  }

  // --- agents --------------------------------------------------------------------------
  async function loadAgents() {
    const { agents } = await api("/agents");
    const list = $("agents"), filter = $("filter-agent");
    list.replaceChildren();
    for (const agent of agents) {
      const card = el("pre", {}, JSON.stringify(agent.card, null, 2));
      const details = el("details", {}, el("summary", {}, agent.card.name + " — " + agent.name + " at " + agent.prefix), card);
      list.append(el("li", {}, details));
      filter.append(el("option", { value: agent.name }, agent.name));
    }
  }

  // --- tasks ---------------------------------------------------------------------------
  function taskQuery(token) {
    const query = new URLSearchParams({ pageSize: "50" });
    if ($("filter-agent").value) query.set("agent", $("filter-agent").value);
    if ($("filter-state").value) query.set("state", $("filter-state").value);
    if (token) query.set("pageToken", token);
    return "/tasks?" + query;
  }

  function taskRow(task) {
    const row = el("tr", { "data-task": task.id, "data-agent": task.agent, onclick: () => showTask(task.agent, task.id) },
      el("td", { class: "muted" }, (task.updatedAt || "").slice(11, 19)),
      el("td", {}, task.agent),
      el("td", {}, el("code", {}, task.id)),
      el("td", {}, task.owner || "(anonymous)"),
      el("td", {}, el("span", { class: "state " + short(task.state), "data-testid": "state" }, short(task.state))));
    if (selected && selected.id === task.id && selected.agent === task.agent) row.classList.add("selected");
    return row;
  }

  async function loadTasks(more) {
    const page = await api(taskQuery(more ? nextTasks : ""));
    const body = $("tasks");
    if (!more) body.replaceChildren();
    for (const task of page.tasks) body.append(taskRow(task));
    nextTasks = page.nextPageToken;
    $("more-tasks").hidden = !nextTasks;
  }

  function matchesFilters(event) {
    const agent = $("filter-agent").value, state = $("filter-state").value;
    return (!agent || event.agent === agent) && (!state || short(event.state) === state.toUpperCase());
  }

  function applyTaskEvent(event) {
    const body = $("tasks");
    const existing = body.querySelector(`tr[data-task="${CSS.escape(event.task)}"][data-agent="${CSS.escape(event.agent)}"]`);
    if (existing) existing.remove();
    if (!matchesFilters(event)) return;
    const row = taskRow({ id: event.task, agent: event.agent, owner: event.owner, state: event.state, updatedAt: event.time });
    body.prepend(row);
    while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
  }

  // --- one task ------------------------------------------------------------------------
  function eventText(entry) {
    const event = entry.event;
    const parts = (p) => (p || []).map((part) => ("text" in part ? part.text : "data" in part ? "[data]" : "[file]")).join(" ");
    if (entry.kind === "task") {
      const history = event.task.history || [];
      return { state: event.task.status.state, text: history.length ? parts(history[0].parts) : "" };
    }
    if (entry.kind === "status") {
      const status = event.statusUpdate.status;
      return { state: status.state, text: status.message ? parts(status.message.parts) : "" };
    }
    if (entry.kind === "artifact") {
      const artifact = event.artifactUpdate.artifact;
      return { state: "", text: (artifact.name ? artifact.name + ": " : "") + parts(artifact.parts) };
    }
    return { state: "", text: (event.role === "ROLE_USER" ? "user: " : "agent: ") + parts(event.parts) };
  }

  function deliveryNode(delivery) {
    const attempts = el("ul", {}, ...delivery.attempts.map((a) =>
      el("li", { "data-testid": "attempt" }, `#${a.number} ${a.at.slice(11, 23)} `,
        (a.error || (a.status ? `HTTP ${a.status}` : "")) + " ", el("span", { class: "muted" }, `${a.durationMs} ms`))));
    const redrive = delivery.state === "failed"
      ? el("button", { "data-testid": "redrive", onclick: () => redriveDelivery(delivery) }, "Redrive")
      : null;
    return el("div", { class: "delivery", "data-delivery": delivery.id, "data-testid": "delivery" },
      el("span", { class: "state " + delivery.state, "data-testid": "delivery-state" }, delivery.state === "failed" ? "dead letter" : delivery.state),
      ` #${delivery.id} task `, el("code", {}, delivery.task.slice(0, 13)), ` event ${delivery.eventSeq} config `,
      el("code", {}, delivery.config), delivery.webhookHost ? " to " : null,
      delivery.webhookHost ? el("code", { "data-testid": "webhook-host" }, delivery.webhookHost) : null, ` ${delivery.attemptsMade} attempt(s) `,
      delivery.lastError ? el("span", { class: "muted" }, delivery.lastError) : null, " ", redrive, attempts);
  }

  async function showTask(agent, id) {
    selected = { agent, id };
    for (const row of $("tasks").rows) row.classList.toggle("selected", row.dataset.task === id && row.dataset.agent === agent);
    const task = await api(`/tasks/${encodeURIComponent(agent)}/${encodeURIComponent(id)}`);
    if (!selected || selected.id !== id) return;
    $("task-panel").hidden = false;
    $("task-id").textContent = id;
    $("task-agent").textContent = agent;
    $("task-owner").textContent = task.owner || "(anonymous)";
    $("task-state").textContent = short(task.state);
    $("task-state").className = "state " + short(task.state);
    $("cancel").hidden = FINAL.has(short(task.state));
    $("timeline").replaceChildren(...task.timeline.map((entry) => {
      const { state, text } = eventText(entry);
      return el("li", { "data-kind": entry.kind, "data-testid": "timeline-entry" },
        el("span", { class: "time" }, entry.at.slice(11, 23)), " ", el("b", {}, entry.kind), " ",
        state ? el("span", { class: "state " + short(state) }, short(state)) : null,
        text ? el("span", { class: "text" }, text) : null);
    }));
    $("task-deliveries").replaceChildren(...(task.deliveries.length ? task.deliveries.map(deliveryNode) : [el("span", { class: "muted" }, "none")]));
  }

  async function cancelTask() {
    if (!selected) return;
    try {
      await api(`/tasks/${encodeURIComponent(selected.agent)}/${encodeURIComponent(selected.id)}/cancel`, { method: "POST" });
    } catch (error) {
      banner("cancel: " + error.message);
    }
    await showTask(selected.agent, selected.id);
  }

  // --- deliveries ----------------------------------------------------------------------
  async function loadDeliveries() {
    const state = $("filter-delivery").value;
    const page = await api("/deliveries?pageSize=50" + (state ? "&state=" + state : ""));
    $("deliveries").replaceChildren(...(page.deliveries.length ? page.deliveries.map(deliveryNode) : [el("span", { class: "muted" }, "none")]));
  }

  async function redriveDelivery(delivery) {
    try {
      // Ids are numbered in each database: the agent names the one it lives in.
      const agent = encodeURIComponent(delivery.agent);
      await api(`/deliveries/${delivery.id}/redrive?agent=${agent}`, { method: "POST" });
    } catch (error) {
      banner("redrive: " + error.message);
    }
    await refreshDeliveries();
  }

  async function refreshDeliveries() {
    await loadDeliveries();
    if (selected) await showTask(selected.agent, selected.id);
  }

  // --- counters and members: the whole deployment ---------------------------------------
  async function loadMembers() {
    const [{ members }, c] = await Promise.all([api("/members"), api("/counters")]);
    const shares = new Map((c.members || []).map((share) => [share.id, share]));
    $("members-count").textContent = members.length + (members.length === 1 ? " process" : " processes");
    $("members").replaceChildren(...members.map((m) => {
      const share = shares.get(m.id) || {};
      return el("tr", { "data-testid": "member", "data-role": m.role },
        el("td", {}, m.role + (m.me ? " (this one)" : "")), el("td", {}, m.host), el("td", {}, m.pid),
        el("td", {}, m.agents.join(", ")), el("td", { class: "muted" }, m.startedAt.slice(0, 19).replace("T", " ")),
        el("td", {}, m.heartbeatAgeSeconds.toFixed(1) + " s"), el("td", {}, m.runningExecutions),
        el("td", {}, m.leases), el("td", {}, (share.messagesPerSecond || 0).toFixed(1)),
        el("td", {}, (share.eventsPerSecond || 0).toFixed(1)));
    }));
  }

  async function loadCounters() {
    const c = await api("/counters");
    $("c-messages").textContent = c.messagesPerSecond.toFixed(1);
    $("c-events").textContent = c.eventsPerSecond.toFixed(1);
    $("c-running").textContent = c.runningExecutions;
    $("c-streams").textContent = c.openStreams;
    $("c-backlog").textContent = c.outboxBacklog;
    $("c-dead").textContent = c.deadLetters;
    $("c-dead").title = `outbox caps: ${c.outboxCaps.perWebhook} pending per webhook, ` +
      `${c.outboxCaps.perTask} per task; newer notifications become dead letters`;
    const open = c.openWebhookHosts;
    $("c-open-hosts").textContent = open.length;
    $("c-open-hosts").title = open.map((h) => `${h.host}: ${h.secondsLeft} s left`).join("\n");
  }

  // --- the live feed -------------------------------------------------------------------
  function connect() {
    const query = new URLSearchParams({ token });
    if (lastSeq !== null) query.set("after", lastSeq);
    if (epoch) query.set("epoch", epoch);
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}${base}/feed?${query}`);
    socket.onmessage = (message) => {
      for (const line of message.data.split("\n")) {  // one event per line
        const event = JSON.parse(line);
        if (event.kind === "feed.hello") {
          epoch = event.epoch;
          retry = 0;
          $("feed-status").textContent = "feed: live";
          $("feed-status").className = "status on";
          continue;
        }
        if (typeof event.seq === "number") lastSeq = Math.max(lastSeq || 0, event.seq);
        pending.push(event);
      }
    };
    socket.onclose = (close) => {
      $("feed-status").textContent = "feed: reconnecting" + (close.reason ? " (" + close.reason + ")" : "");
      $("feed-status").className = "status off";
      retry = Math.min(retry + 1, 5);
      setTimeout(connect, 250 * 2 ** retry);
    };
  }

  // Batched: however many events arrived, the page changes at most every FLUSH_MS.
  function flush() {
    const events = pending;
    pending = [];
    if (!events.length) return;
    const latest = new Map();
    let deliveries = false, current = false;
    for (const event of events) {
      if (event.kind.startsWith("task.")) latest.set(event.agent + "\u0000" + event.task, event);
      if (event.kind.startsWith("webhook.")) deliveries = true;
      if (selected && event.task === selected.id && event.agent === selected.agent) current = true;
    }
    for (const event of latest.values()) applyTaskEvent(event);
    if (deliveries) loadDeliveries().catch(() => {});
    if (current) showTask(selected.agent, selected.id).catch(() => {});
  }

  async function start() {
    $("login").hidden = true;
    banner("");
    $("main").hidden = false;
    try {
      await loadAgents();
    } catch (error) {
      return;
    }
    sessionStorage.setItem("a2a-console-token", token);
    await Promise.all([loadTasks(false), loadDeliveries(), loadCounters(), loadMembers()]);
    connect();
    setInterval(flush, FLUSH_MS);
    setInterval(() => loadCounters().catch(() => {}), 1000);
    setInterval(() => loadMembers().catch(() => {}), 2000);
  }

  $("filter-agent").addEventListener("change", () => loadTasks(false));
  $("filter-state").addEventListener("change", () => loadTasks(false));
  $("filter-delivery").addEventListener("change", loadDeliveries);
  $("more-tasks").addEventListener("click", () => loadTasks(true));
  $("cancel").addEventListener("click", cancelTask);
  $("login").addEventListener("submit", (submit) => {
    submit.preventDefault();
    token = $("token-input").value;
    start();
  });
  if (location.hash) history.replaceState(null, "", location.pathname);  // keep the token off the address bar
  if (token) start(); else $("login").hidden = false;
})();
