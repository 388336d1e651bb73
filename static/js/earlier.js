// "Show earlier messages": the control swaps itself for the window of runs before the
// oldest one shown (htmx GET of chat/_earlier.html, see chat.views.conversation_earlier).
// Content added above what the reader looks at would push it down: the distance from the
// bottom of the message list is kept across the swap, so nothing on screen moves. The
// focus goes to the next "Show earlier messages" (Enter again loads more), or to the
// first run loaded when the conversation's start is reached; the announcer says so.
(function () {
  "use strict";

  var kept = null;  // the list's distance from its bottom before the swap, in px

  function messages() { return document.getElementById("messages"); }

  function fromControl(event) {
    var elt = event.detail && event.detail.requestConfig && event.detail.requestConfig.elt;
    return !!(elt && elt.hasAttribute && elt.hasAttribute("data-show-earlier"));
  }

  function say(text) {
    var el = document.getElementById("announcer");
    if (el) el.textContent = text;
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    if (!fromControl(event)) return;
    var xhr = event.detail.xhr;
    if (xhr && xhr.status >= 400) {
      // A 400 would be swapped in by the page's htmx config: keep the control to retry.
      event.detail.shouldSwap = false;
      var error = document.getElementById("chat-error");
      if (error) {
        error.textContent = "Could not load the earlier messages (HTTP " + xhr.status +
          "). Reload the page.";
        error.classList.add("visible");
      }
      return;
    }
    var box = messages();
    kept = box ? box.scrollHeight - box.scrollTop : null;
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    if (!fromControl(event) || kept === null) return;
    var box = messages();
    if (box) box.scrollTop = box.scrollHeight - kept;
    kept = null;
    var next = document.querySelector("#earlier [data-show-earlier]");
    if (next) {
      next.focus({preventScroll: true});
      say("Earlier messages loaded above.");
      return;
    }
    var first = box && box.querySelector(".run");
    if (first) {
      first.setAttribute("tabindex", "-1");
      first.focus({preventScroll: true});
    }
    say("Earlier messages loaded: this is the start of the conversation.");
  });
})();
