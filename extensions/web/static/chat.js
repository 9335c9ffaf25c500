// The web chat: the history when the page opens, then the answers as they are written (server-sent events).
(function () {
  "use strict";
  var csrf = document.querySelector('meta[name="csrf-token"]').getAttribute("content");
  var list = document.getElementById("messages");
  var form = document.getElementById("composer");
  var input = document.getElementById("text");
  var button = document.getElementById("send");
  var status = document.getElementById("status");
  var typing = document.getElementById("typing");
  var bubbles = {};
  var typingTimer = null;

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
      bubbles[event.id] = add("bot", event.text, event.id);
    } else if (event.op === "edit") {
      var item = bubbles[event.id];
      if (item) { item.firstChild.textContent = event.text; } else { bubbles[event.id] = add("bot", event.text, event.id); }
    } else if (event.op === "delete") {
      var gone = bubbles[event.id];
      if (gone) { gone.remove(); delete bubbles[event.id]; }
    } else if (event.op === "notice") {
      stopTyping();
      add("notice", event.text);
    } else if (event.op === "typing") {
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
        body.messages.forEach(function (m) { add(m.role === "user" ? "user" : "bot", m.text); });
      })
      .catch(function () { /* no history shown */ });
  }

  function send() {
    var text = input.value.trim();
    if (!text || button.disabled) { return; }
    add("user", text);
    input.value = "";
    fetch("chat/send", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ text: text })
    }).then(function (response) {
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
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); send(); }
  });
  loadHistory().then(connect);
}());
