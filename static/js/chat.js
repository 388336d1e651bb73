// Small behaviours htmx does not cover: Enter to send, reset after send, keep the
// newest step in view, show the socket's state, fill in an example question.
(function () {
  "use strict";

  function composer() { return document.getElementById("composer"); }
  function input() { return document.getElementById("composer-input"); }
  function messages() { return document.getElementById("messages"); }

  var stickToBottom = true;

  document.addEventListener("keydown", function (event) {
    if (event.target !== input()) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (input().value.trim()) composer().requestSubmit();
    }
  });

  document.addEventListener("click", function (event) {
    var example = event.target.closest("[data-example]");
    if (!example) return;
    input().value = example.getAttribute("data-example");
    input().focus();
  });

  document.addEventListener("scroll", function (event) {
    var box = messages();
    if (event.target !== box) return;
    stickToBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  }, true);

  function scrollDown() {
    var box = messages();
    if (box && stickToBottom) box.scrollTop = box.scrollHeight;
  }

  function setConnection(state, text) {
    var el = document.getElementById("connection");
    if (!el) return;
    el.setAttribute("data-state", state);
    el.textContent = text;
  }

  document.addEventListener("htmx:wsOpen", function () { setConnection("open", "live"); });
  document.addEventListener("htmx:wsClose", function () {
    setConnection("closed", "reconnecting…");
  });
  document.addEventListener("htmx:wsAfterSend", function () {
    input().value = "";
    stickToBottom = true;
  });
  document.addEventListener("htmx:wsAfterMessage", scrollDown);
  document.addEventListener("DOMContentLoaded", function () {
    stickToBottom = true;
    scrollDown();
    if (input()) input().focus();
  });
})();
