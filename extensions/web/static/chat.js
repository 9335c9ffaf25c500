// The web chat: the history when the page opens, then the answers as they are written (server-sent events),
// each laid out once complete (its Markdown as HTML, rendered by the bot: extensions/web/rich.py).
// While the bot writes (its "typing", or an answer growing, seen lately), a Stop button sends /stop.
(function () {
  "use strict";
  var csrf = document.querySelector('meta[name="csrf-token"]').getAttribute("content");
  var list = document.getElementById("messages");
  var form = document.getElementById("composer");
  var input = document.getElementById("text");
  var button = document.getElementById("send");
  var status = document.getElementById("status");
  var typing = document.getElementById("typing");
  var stopButton = document.getElementById("stop");
  var bubbles = {};
  var typingTimer = null;
  var writingTimer = null;
  var WRITING_QUIET_MS = 3000;  // the bot's "typing" comes every 2 s while it works
  var STOPPED = / \[stopped\]$/;  // the mark of an answer stopped (core.engine.STOP_MARK)

  function writing() {
    stopButton.hidden = false;
    if (writingTimer) { clearTimeout(writingTimer); }
    writingTimer = setTimeout(quiet, WRITING_QUIET_MS);
  }

  function growing(text) {  // an answer shown or grown: still writing, unless it ends stopped
    if (STOPPED.test(text)) { quiet(); } else { writing(); }
  }

  function quiet() {
    stopButton.hidden = true;
    if (writingTimer) { clearTimeout(writingTimer); writingTimer = null; }
  }

  function setStatus(state, text) {
    status.setAttribute("data-state", state);
    status.textContent = text;
  }

  function add(role, text, id) {
    var item = document.createElement("article");
    item.className = "message " + role;
    if (id) { item.setAttribute("data-id", id); }
    var body = document.createElement("p");
    body.textContent = text;
    item.appendChild(body);
    list.appendChild(item);
    list.scrollTop = list.scrollHeight;
    window.scrollTo(0, document.body.scrollHeight);
    return item;
  }

  function layOut(item, html) {  // a finished answer, laid out: its Markdown rendered by the bot, raw HTML escaped
    var body = document.createElement("div");
    body.className = "rich";
    body.innerHTML = html;
    item.replaceChildren(body);
  }

  function addMedia(event) {  // a picture (<img>) or a spoken reply (<audio>), served by this site; the caption as text
    var url = String(event.url || "");
    if (!/^chat\/media\/[A-Za-z0-9_-]+$/.test(url)) { return; }
    var item = document.createElement("article");
    item.className = "message bot media";
    var element;
    if (event.kind === "picture") {
      element = document.createElement("img");
      element.alt = event.caption || "a picture";
    } else if (event.kind === "voice") {
      element = document.createElement("audio");
      element.controls = true;
      element.preload = "metadata";
    } else { return; }
    element.src = url;
    item.appendChild(element);
    if (event.caption) {
      var caption = document.createElement("p");
      caption.textContent = event.caption;
      item.appendChild(caption);
    }
    list.appendChild(item);
    list.scrollTop = list.scrollHeight;
    window.scrollTo(0, document.body.scrollHeight);
  }

  function stopTyping() {
    typing.hidden = true;
    if (typingTimer) { clearTimeout(typingTimer); typingTimer = null; }
  }

  function handle(event) {
    if (event.op === "ready") {
      setStatus("ready", "connected");
      button.disabled = false;
    } else if (event.op === "post") {
      stopTyping();
      growing(event.text);
      bubbles[event.id] = add("bot", event.text, event.id);
    } else if (event.op === "edit") {
      growing(event.text);
      var item = bubbles[event.id];
      if (item) { item.firstChild.textContent = event.text; } else { bubbles[event.id] = add("bot", event.text, event.id); }
    } else if (event.op === "done") {
      var done = bubbles[event.id];
      if (done && typeof event.html === "string") { layOut(done, event.html); }
    } else if (event.op === "delete") {
      var gone = bubbles[event.id];
      if (gone) { gone.remove(); delete bubbles[event.id]; }
    } else if (event.op === "media") {
      stopTyping();
      addMedia(event);
    } else if (event.op === "notice") {
      stopTyping();
      add("notice", event.text);
    } else if (event.op === "typing") {
      writing();
      typing.hidden = false;
      if (typingTimer) { clearTimeout(typingTimer); }
      typingTimer = setTimeout(stopTyping, 6000);
    }
  }

  function connect() {
    var source = new EventSource("chat/events");
    source.onmessage = function (message) {
      try { handle(JSON.parse(message.data)); } catch (err) { /* a malformed event is skipped */ }
    };
    source.onerror = function () {
      setStatus("offline", "reconnecting…");
      button.disabled = true;
    };
  }

  function loadHistory() {
    return fetch("chat/history", { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : { messages: [] }; })
      .then(function (body) {
        body.messages.forEach(function (m) {
          var item = add(m.role === "user" ? "user" : "bot", m.text);
          if (m.role !== "user" && typeof m.html === "string") { layOut(item, m.html); }
        });
      })
      .catch(function () { /* no history shown */ });
  }

  function post(text) {
    return fetch("chat/send", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ text: text })
    });
  }

  function stop() {
    quiet();
    post("/stop").then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        add("notice", body.notice || body.error || "The answer could not be stopped (" + response.status + ").");
      });
    }).catch(function () { add("notice", "The answer could not be stopped: the bot is not reachable."); });
  }

  function send() {
    var text = input.value.trim();
    if (!text || button.disabled) { return; }
    add("user", text);
    input.value = "";
    if (text.charAt(0) !== "/") { writing(); }
    post(text).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        if (body.notice) {
          if (text === "/forget" || text === "/reset") { list.textContent = ""; }
          add("notice", body.notice);
        } else if (!response.ok) {
          add("notice", body.error || "The message could not be sent (" + response.status + ").");
        }
      });
    }).catch(function () { add("notice", "The message could not be sent: the bot is not reachable."); });
  }

  form.addEventListener("submit", function (event) { event.preventDefault(); send(); });
  stopButton.addEventListener("click", stop);
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); send(); }
  });
  loadHistory().then(connect);
}());
