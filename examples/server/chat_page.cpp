// The chat page served at GET /: one HTML file with its CSS and vanilla JS.
// It streams answers from /v1/chat/completions (or /v1/completions in text
// mode, for models without a chat template) with fetch + ReadableStream,
// parsing the server-sent events itself; Stop aborts the fetch, which closes
// the connection, and the server cancels the request. Text is always put into
// the page with textContent, never parsed as HTML.
#include "chat_page.hpp"

namespace photon::server {

namespace {

constexpr const char kChatPage[] = R"PHOTON_PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>photon chat</title>
<link rel="icon" href="data:,">
<style>
  :root { --bg: #f6f7f9; --panel: #fff; --line: #d9dde3; --ink: #1d2330; --muted: #6b7280;
          --user: #e7efff; --bot: #fff; --accent: #2f6fed; --err: #b42318; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
         background: var(--bg); display: flex; flex-direction: column; height: 100vh; }
  header { display: flex; align-items: center; gap: 12px; padding: 10px 16px; background: var(--panel);
           border-bottom: 1px solid var(--line); }
  header h1 { font-size: 17px; margin: 0; }
  #model { color: var(--muted); font-size: 13px; }
  header .spacer { flex: 1; }
  details { position: relative; }
  details summary { cursor: pointer; color: var(--accent); list-style: none; }
  #settings { position: absolute; right: 0; top: 28px; z-index: 2; width: 320px; padding: 12px;
              background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
              box-shadow: 0 6px 24px rgba(0,0,0,.08); display: grid; gap: 8px; }
  #settings label { display: grid; gap: 2px; font-size: 13px; color: var(--muted); }
  #settings input, #settings select, #settings textarea { font: inherit; padding: 4px 6px;
              border: 1px solid var(--line); border-radius: 6px; color: var(--ink); }
  main { flex: 1; overflow-y: auto; padding: 16px; }
  #log { max-width: 820px; margin: 0 auto; display: flex; flex-direction: column; gap: 10px; }
  .msg { padding: 10px 14px; border-radius: 10px; border: 1px solid var(--line); white-space: pre-wrap;
         word-wrap: break-word; }
  .msg.user { background: var(--user); align-self: flex-end; max-width: 85%; }
  .msg.assistant { background: var(--bot); }
  .msg.error { color: var(--err); border-color: var(--err); background: #fff5f4; }
  .msg .meta { display: block; margin-top: 6px; font-size: 12px; color: var(--muted); white-space: normal; }
  .empty { color: var(--muted); text-align: center; margin-top: 20vh; }
  footer { padding: 12px 16px; background: var(--panel); border-top: 1px solid var(--line); }
  form { max-width: 820px; margin: 0 auto; display: flex; gap: 8px; align-items: flex-end; }
  textarea#input { flex: 1; resize: none; min-height: 44px; max-height: 200px; padding: 10px;
                   font: inherit; border: 1px solid var(--line); border-radius: 8px; }
  button { font: inherit; padding: 9px 14px; border-radius: 8px; border: 1px solid var(--line);
           background: var(--panel); cursor: pointer; }
  button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
  button:disabled { opacity: .45; cursor: default; }
</style>
</head>
<body>
<header>
  <h1>photon</h1>
  <span id="model">connecting&hellip;</span>
  <span class="spacer"></span>
  <details>
    <summary>Settings</summary>
    <div id="settings">
      <label>Mode
        <select id="mode">
          <option value="chat">Chat (the model's chat template)</option>
          <option value="text">Text completion (raw prompt)</option>
        </select>
      </label>
      <label>System prompt <textarea id="system" rows="2" placeholder="(none)"></textarea></label>
      <label>Temperature <input id="temperature" type="number" min="0" max="2" step="0.1" value="0.7"></label>
      <label>Top p <input id="top_p" type="number" min="0.01" max="1" step="0.05" value="0.95"></label>
      <label>Max tokens (empty: up to the context) <input id="max_tokens" type="number" min="1" step="1" value="512"></label>
    </div>
  </details>
  <button id="reset" type="button" title="Forget the conversation">Reset</button>
</header>
<main id="scroller"><div id="log"><p class="empty" id="empty">Send a message to start.</p></div></main>
<footer>
  <form id="form">
    <textarea id="input" rows="1" placeholder="Message (Enter sends, Shift+Enter for a new line)"></textarea>
    <button id="stop" type="button" disabled>Stop</button>
    <button id="send" class="primary" type="submit">Send</button>
  </form>
</footer>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let history = [];          // [{role, content}] of the conversation so far
let controller = null;     // the AbortController of the answer being streamed
let conversation = 0;      // bumped by Reset: an answer that ends later stays out of the new history

function addMessage(role, text) {
  const empty = $("empty");
  if (empty) empty.remove();
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("log").appendChild(div);
  scrollDown();
  return div;
}
function scrollDown() { const s = $("scroller"); s.scrollTop = s.scrollHeight; }
function setBusy(busy) {
  $("send").disabled = busy; $("stop").disabled = !busy; $("input").disabled = busy;
}
function addMeta(div, text) {
  const meta = document.createElement("span");
  meta.className = "meta";
  meta.textContent = text;
  div.appendChild(meta);
}
function numberOr(id, fallback) {
  const v = $(id).value.trim();
  return v === "" ? fallback : Number(v);
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models");
    const j = await r.json();
    const m = j.data && j.data[0];
    $("model").textContent = m ? m.id + " \u00b7 " + m.max_model_len + " tokens of context" : "no model";
  } catch (e) {
    $("model").textContent = "server unreachable";
  }
}

// Reads "data: ..." server-sent events from a fetch body; calls onData with
// each parsed JSON payload until "data: [DONE]".
async function readEvents(body, onData) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }
}

async function send(text) {
  const mode = $("mode").value;
  const body = {
    stream: true,
    stream_options: { include_usage: true },
    temperature: numberOr("temperature", 0.7),
    top_p: numberOr("top_p", 1),
  };
  const maxTokens = numberOr("max_tokens", null);
  if (maxTokens !== null) body.max_tokens = maxTokens;
  let url;
  if (mode === "chat") {
    history.push({ role: "user", content: text });
    const system = $("system").value.trim();
    body.messages = (system ? [{ role: "system", content: system }] : []).concat(history);
    url = "/v1/chat/completions";
  } else {
    body.prompt = text;
    url = "/v1/completions";
  }
  addMessage("user", text);
  const div = addMessage("assistant", "");
  let answer = "", usage = null, finish = null;
  const started = performance.now();
  const turnOf = conversation;
  controller = new AbortController();
  setBusy(true);
  try {
    const r = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!r.ok) {
      let message = r.status + " " + r.statusText;
      try { message = (await r.json()).error.message; } catch (e) {}
      throw new Error(message);
    }
    await readEvents(r.body, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) return;
      const piece = mode === "chat" ? (choice.delta && choice.delta.content) || "" : choice.text || "";
      if (piece) { answer += piece; div.textContent = answer; scrollDown(); }
      if (choice.finish_reason) finish = choice.finish_reason;
    });
    const seconds = (performance.now() - started) / 1000;
    const n = usage ? usage.completion_tokens : 0;
    addMeta(div, n + " tokens \u00b7 " + (n / seconds).toFixed(1) + " tokens/s" +
                 (finish === "length" ? " \u00b7 stopped at max tokens" : ""));
  } catch (e) {
    if (e.name === "AbortError") {
      addMeta(div, "stopped");
    } else {
      controller.abort();  // the server cancels the rest of the answer
      if (!answer) div.remove();
      let message = e.message;
      if (mode === "chat" && message.includes("no chat template")) {
        $("mode").value = "text";  // the model can only continue text
        message += "\nSwitched to text completion mode (Settings): send your text again.";
      }
      addMessage("error", message);
      if (mode === "chat" && turnOf === conversation) history.pop();  // the failed turn leaves the history
      answer = null;
    }
  } finally {
    controller = null;
    setBusy(false);
    $("input").focus();
  }
  if (mode === "chat" && answer !== null && turnOf === conversation) history.push({ role: "assistant", content: answer });
}

$("form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("form").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("reset").addEventListener("click", () => {
  if (controller) controller.abort();
  conversation += 1;
  history = [];
  $("log").replaceChildren();
  const p = document.createElement("p");
  p.className = "empty"; p.id = "empty"; p.textContent = "Conversation cleared.";
  $("log").appendChild(p);
});
loadModel();
$("input").focus();
</script>
</body>
</html>
)PHOTON_PAGE";

}  // namespace

std::string_view chat_page_html() noexcept { return {kChatPage, sizeof(kChatPage) - 1}; }

}  // namespace photon::server
