// "Show earlier messages" and an ended run's "Show the N earlier steps": the control
// swaps itself for what came before the oldest item shown (an htmx GET of
// chat/_earlier.html or chat/_steps.html, see chat.views). Content added above what the
// reader looks at would push it down: the message list's distance from its bottom is
// kept across the swap, so nothing on screen moves. The focus goes to the next control of
// the same list (Enter again loads more), or to the first item loaded when the start is
// reached; the announcer says what was loaded.
(function () {
  "use strict";

  var kept = null;  // {fromBottom: px, list: the control's list, text: what to announce}
  var wanted = null;  // the id of a step a timeline bar asked for before it was loaded

  // A timeline bar of a step not shown yet (an ended run shows its last steps): load the
  // run's earlier steps, then go to it as static/js/timeline.js does for a shown one.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest(".tl-link[data-step]");
    if (!link || document.getElementById("step-" + link.dataset.step)) return;
    var run = link.closest(".run");
    var more = run && run.querySelector(".earlier-steps [data-show-earlier]");
    if (!more) return;
    event.preventDefault();
    wanted = "step-" + link.dataset.step;
    more.click();
  }, true);

  function goTo(step) {
    if (step.tagName === "DETAILS") step.open = true;
    step.scrollIntoView({block: "center"});
    if (!step.hasAttribute("tabindex")) step.setAttribute("tabindex", "-1");
    step.focus({preventScroll: true});
  }

  function messages() { return document.getElementById("messages"); }

  function control(event) {
    var elt = event.detail && event.detail.requestConfig && event.detail.requestConfig.elt;
    return elt && elt.hasAttribute && elt.hasAttribute("data-show-earlier") ? elt : null;
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var elt = control(event);
    if (!elt) return;
    var xhr = event.detail.xhr;
    if (xhr && xhr.status >= 400) {
      // A 400 would be swapped in by the page's htmx config: keep the control to retry.
      event.detail.shouldSwap = false;
      var error = document.getElementById("chat-error");
      if (error) {
        error.textContent = "Could not load the earlier part (HTTP " + xhr.status +
          "). Reload the page.";
        error.classList.add("visible");
      }
      return;
    }
    var box = messages();
    var wrapper = elt.closest(".earlier");
    kept = {
      fromBottom: box ? box.scrollHeight - box.scrollTop : null,
      list: wrapper && wrapper.parentElement,
      // The first item shown now: what is loaded lands just before it.
      anchor: wrapper && wrapper.nextElementSibling,
      text: elt.getAttribute("data-loaded") || "Loaded."
    };
  });

  // Say it the way static/js/a11y.js does: a line in the live region.
  function say(text) {
    var box = document.getElementById("announcer");
    if (!box) return;
    var line = document.createElement("p");
    line.textContent = text;
    box.appendChild(line);
    while (box.childElementCount > 5) box.removeChild(box.firstElementChild);
  }

  document.addEventListener("htmx:afterSwap", function (event) {
    if (!control(event) || kept === null) return;
    var state = kept;
    kept = null;
    var box = messages();
    if (box && state.fromBottom !== null) box.scrollTop = box.scrollHeight - state.fromBottom;
    var step = wanted && document.getElementById(wanted);
    wanted = null;
    if (step) {
      goTo(step);
      say(state.text);
      return;
    }
    var loaded = state.anchor ? state.anchor.previousElementSibling : null;
    if (!loaded || !loaded.matches(".history")) return;
    // htmx wires new content up when it settles, after this swap's events: the next
    // control gets the focus now, and Enter on it must work at once.
    if (window.htmx) window.htmx.process(loaded);
    var next = loaded.querySelector(":scope > .earlier [data-show-earlier]");
    if (next) {
      next.focus({preventScroll: true});
      say(state.text);
      return;
    }
    var first = loaded.querySelector(":scope > .run, :scope > [id^='step-']");
    if (first) {
      var target = first.matches("details") ? first.querySelector("summary") : first;
      if (target === first) first.setAttribute("tabindex", "-1");
      target.focus({preventScroll: true});
    }
    say(state.text + " This is the start.");
  });
})();
