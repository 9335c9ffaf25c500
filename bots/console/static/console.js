// The console's little script: confirm before a destructive button, and the live tail of run events.
(function () {
  "use strict";
  document.querySelectorAll("[data-confirm]").forEach(function (button) {
    button.addEventListener("click", function (event) {
      if (!window.confirm(button.getAttribute("data-confirm"))) { event.preventDefault(); }
    });
  });
  var tail = document.getElementById("tail");
  if (tail) {
    var source = new EventSource(tail.getAttribute("data-src"));
    source.onmessage = function (message) {
      var item;
      try { item = JSON.parse(message.data); } catch (err) { return; }
      var line = item.type === "watching" ? "watching: new runs appear here\n" :
        "[step " + item.step + "] " + item.type + (item.output_type ? " " + item.output_type : "") +
        (item.final ? " (final)" : "") + (item.error ? " error: " + item.error : "") + ": " + item.content + "\n";
      tail.appendChild(document.createTextNode(line));
      tail.scrollTop = tail.scrollHeight;
    };
  }
}());
