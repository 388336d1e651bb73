// The composer's character count: from COUNT_FROM of CHAT_MAX_MESSAGE_CHARS on it shows
// how many characters the message has; over the limit it says so in the server's own
// words (chat.validation.TOO_LONG_REASON, the textarea's data-too-long), Send is disabled
// and a submission (Enter) is held back. The text is never cut: the textarea has no
// maxlength, so a long paste stays whole to be shortened.
(function () {
  "use strict";

  var COUNT_FROM = 0.8;
  var wasOver = false;

  function input() { return document.getElementById("composer-input"); }

  // The text as the server counts it (chat.validation.clean_message): without the blank
  // lines it starts with and the white space it ends with, in characters (code points).
  function textLength(field) {
    return Array.from(field.value.trimEnd().replace(/^\s*\n/, "")).length;
  }

  function maxChars(field) {
    return Number(field.getAttribute("data-max-chars")) || 0;
  }

  function isOver(field) {
    var max = maxChars(field);
    return !!max && textLength(field) > max;
  }

  // A line of the live region, as static/js/a11y.js adds its own (it keeps the last few).
  function announce(text) {
    var box = document.getElementById("announcer");
    if (!box) return;
    var line = document.createElement("p");
    line.textContent = text;
    box.appendChild(line);
  }

  function update() {
    var field = input();
    var count = document.getElementById("composer-count");
    if (!field || !count) return;
    var max = maxChars(field);
    var length = textLength(field);
    var over = isOver(field);
    if (!max || length < COUNT_FROM * max) {
      count.hidden = true;
      count.textContent = "";
    } else if (over) {
      count.hidden = false;
      count.textContent = field.getAttribute("data-too-long")
        .replace("{length:,}", length.toLocaleString("en-US"))
        .replace("{limit:,}", max.toLocaleString("en-US")) +
        " Shorten it to send; your text is kept.";
    } else {
      count.hidden = false;
      count.textContent = length.toLocaleString("en-US") + " of " +
        max.toLocaleString("en-US") + " characters";
    }
    count.classList.toggle("over", over);
    if (over) field.setAttribute("aria-invalid", "true");
    else field.removeAttribute("aria-invalid");
    if (over !== wasOver) {
      // Said once as the text crosses the limit, not at every key.
      announce(over ? count.textContent : "Your message is within the limit again.");
      wasOver = over;
    }
    // Only Send: while a run goes the button is Stop (chat.js), which needs no text.
    var button = document.getElementById("send");
    if (button && button.getAttribute("data-mode") === "send") button.disabled = over;
  }

  document.addEventListener("input", function (event) {
    if (event.target === input()) update();
  });
  // chat.js sets the button's mode as each message arrives; this runs after it.
  document.addEventListener("htmx:wsAfterMessage", update);
  document.addEventListener("DOMContentLoaded", update);

  // Enter submits without the button: a text over the limit is held back here too.
  document.addEventListener("htmx:wsConfigSend", function (event) {
    var field = input();
    if (!field || event.target !== field.form || !isOver(field)) return;
    var button = document.getElementById("send");
    if (button && button.getAttribute("data-mode") !== "send") return;  // Stop goes out
    var trigger = event.detail && event.detail.triggeringEvent;
    if (trigger) trigger.preventDefault();
    event.preventDefault();
    update();
  });
})();
