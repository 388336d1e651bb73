// An answer's thumbs and comment (templates/chat/_feedback.html): the comment's count and
// Ctrl+Enter, and what a tab keeps when the server sends the feedback again (every tab
// gets every change): the keyboard focus, and a comment being typed that is not saved.
(function () {
  "use strict";

  function feedbackOf(element) {
    return element && element.closest ? element.closest(".feedback") : null;
  }

  function count(box) {
    var label = document.getElementById(box.id + "-count");
    if (!label) return;
    var max = Number(box.getAttribute("data-max-chars"));
    var length = Array.from(box.value).length;  // characters, as the server counts them
    var over = length > max;
    label.textContent = length + " / " + max + " characters" + (over ? ": too long" : "");
    label.classList.toggle("over", over);
  }

  // Which control of a feedback element has the focus, as a selector in its successor.
  function focusedControl(element) {
    var active = document.activeElement;
    if (!active || !element.contains(active)) return null;
    if (active.matches(".thumb-up")) return ".thumb-up";
    if (active.matches(".thumb-down")) return ".thumb-down";
    if (active.matches("textarea")) return "textarea";
    if (active.matches(".feedback-save")) return ".feedback-save";
    return null;
  }

  // Carry what the person was doing from ``old`` into ``fresh`` (not yet on the page): a
  // comment that differs from the one saved stays in the box, marked as not saved.
  var refocus = null;
  function carry(old, fresh) {
    refocus = focusedControl(old);
    var typed = old.querySelector("textarea");
    var box = fresh.querySelector("textarea");
    if (!typed || !box || typed.value === typed.defaultValue) return;
    if (typed.value === box.defaultValue) return;  // what was typed is what is saved now
    box.value = typed.value;
    markDraft(box);
  }

  // A comment that differs from the one saved says so in words, not by colour alone.
  function markDraft(box) {
    var form = box.closest("form");
    form.setAttribute("data-draft", "");
    var note = form.querySelector(".feedback-draft");
    if (note) note.textContent = "Not saved yet";
  }

  function restoreFocus(element) {
    var selector = refocus;
    refocus = null;
    var control = selector && element.querySelector(selector);
    if (control) control.focus();
    var box = element.querySelector("textarea[data-max-chars]");
    if (box) count(box);
  }

  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var detail = event.detail;
    var incoming = detail && detail.fragment && detail.fragment.firstElementChild;
    if (!incoming || !incoming.classList) return;
    if (incoming.classList.contains("feedback")) {
      if (detail.target && detail.target.classList.contains("feedback")) {
        carry(detail.target, incoming);
      }
      return;
    }
    // An ended run sent again whole (a socket that reconnects) is kept as it is
    // (chat.js): its feedback may have changed meanwhile in another tab.
    if (detail.shouldSwap || !incoming.classList.contains("run")) return;
    var existing = document.getElementById(incoming.id);
    var fresh = incoming.querySelector(".feedback");
    var old = existing && existing !== incoming ? existing.querySelector(".feedback") : null;
    if (!fresh || !old || fresh.outerHTML === old.outerHTML) return;
    carry(old, fresh);
    old.replaceWith(fresh);
    if (window.htmx) window.htmx.process(fresh);
    restoreFocus(fresh);
  });
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    var element = event.target;
    if (element && element.classList && element.classList.contains("feedback")) {
      restoreFocus(element);
    }
  });

  document.addEventListener("input", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches(".feedback textarea[data-max-chars]")) return;
    count(box);
    markDraft(box);
  });

  // Ctrl+Enter (Cmd+Enter) saves the comment; Enter alone starts a new line.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey) || event.isComposing) return;
    var box = event.target;
    if (!box.matches || !box.matches(".feedback textarea[name=comment]")) return;
    event.preventDefault();
    box.form.requestSubmit();
  });

  document.addEventListener("htmx:wsConfigSend", function (event) {
    var form = event.target.closest && event.target.closest("[data-feedback-form]");
    if (form) form.setAttribute("data-sent", "");
  });

  // A refusal (a comment too long...) leaves the element and what was typed as they are.
  document.addEventListener("htmx:load", function (event) {
    var element = event.target;
    if (!element.getAttribute || element.getAttribute("data-outcome") !== "feedback-refused") return;
    var feedback = feedbackOf(element);
    if (!feedback) return;
    feedback.querySelectorAll("[data-sent]").forEach(function (form) {
      form.removeAttribute("data-sent");
    });
  });
})();
