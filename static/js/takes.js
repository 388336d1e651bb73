// The message list replaced whole: a take switched or started, in this tab or another
// (chat/fragments.py, branch_shown). What the reader had in it is kept where it can be:
// an Edit box they opened or typed in (found again by its id), the keyboard focus (the
// same control, else the switcher of the same question, found by its takes'
// data-takes), and, when they switched takes here, that switcher's place on screen.
(function () {
  "use strict";

  function list() { return document.getElementById("messages"); }

  var kept = null;  // what take() saw before the swap, until it is put back

  // The questions an element belongs to: a switcher's takes, or its run's question.
  function questionsOf(element) {
    var nav = element.closest(".takes[data-takes]");
    if (nav) return nav.getAttribute("data-takes").split(",");
    var run = element.closest(".run[data-question]");
    return run ? [run.getAttribute("data-question")] : [];
  }

  function switcherFor(questions) {
    var navs = list().querySelectorAll(".takes[data-takes]");
    for (var i = 0; i < navs.length; i++) {
      var takes = navs[i].getAttribute("data-takes").split(",");
      if (questions.some(function (q) { return takes.indexOf(q) !== -1; })) return navs[i];
    }
    return null;
  }

  function take() {
    var box = list();
    var edits = [];
    box.querySelectorAll("details.edit-question textarea[id]").forEach(function (area) {
      var details = area.closest("details");
      if (details.open || area.value !== area.defaultValue) {
        edits.push({ id: area.id, value: area.value, open: details.open });
      }
    });
    var active = document.activeElement;
    var focus = null;
    if (active && active !== box && box.contains(active)) {
      var nav = active.closest(".takes");
      focus = {
        id: active.id,
        arrow: nav && (active.classList.contains("takes-next") ? "takes-next" : "takes-previous"),
        questions: questionsOf(active),
        // Switching takes here: the switcher stays where it is on screen.
        top: nav ? nav.getBoundingClientRect().top : null
      };
    }
    return { edits: edits, focus: focus };
  }

  function putBack(state) {
    state.edits.forEach(function (edit) {
      var area = document.getElementById(edit.id);
      if (!area) return;  // its exchange is on another take now
      area.value = edit.value;
      area.closest("details").open = edit.open;
    });
    var focus = state.focus;
    if (!focus || (document.activeElement && document.activeElement !== document.body)) return;
    var target = focus.id && document.getElementById(focus.id);
    var nav = switcherFor(focus.questions);
    if (!target && nav) {
      var arrow = focus.arrow && nav.querySelector("." + focus.arrow + ":not([disabled])");
      target = arrow || nav;
    }
    if (!target) return;
    target.focus({ preventScroll: true });
    if (nav && focus.top !== null) {
      var moved = nav.getBoundingClientRect().top - focus.top;
      if (Math.abs(moved) >= 1) list().scrollTop += moved;
    }
  }

  function isList(detail) { return detail && detail.target && detail.target.id === "messages"; }

  // The switcher's own request (hx-target="#messages"), and the list every tab is sent.
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (isList(event.detail)) kept = take();
  });
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    if (isList(event.detail) && event.detail.shouldSwap !== false) kept = take();
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    if (!isList(event.detail) || !kept) return;
    putBack(kept);
    kept = null;
  });
  // After a socket message chat.js may follow the bottom: put things back after it.
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (!kept) return;
    putBack(kept);
    kept = null;
  });
})();
