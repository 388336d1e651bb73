// The conversation list and the page's frame: the phone drawer (menu button, Esc, a tap
// outside; focus kept where it belongs), the tab title following the conversation's
// title, the open conversation's marker following its last run, the list's menus, and a
// composer placeholder that fits the screen. The list itself is server-rendered (htmx).
(function () {
  "use strict";

  var PHONE = window.matchMedia("(max-width: 720px)");
  var COARSE = window.matchMedia("(pointer: coarse)");
  var SUFFIX = " · Agent chat";
  // A run's status -> the list's marker (chat/store/listing.py MARKERS and marker() say
  // the same).
  var MARKERS = {
    running: ["running", "a run is going"],
    failed: ["failed", "last run failed"],
    max_iterations: ["failed", "last run hit the model-turn limit"],
    interrupted: ["failed", "last run was interrupted"],
    time_limit: ["failed", "last run reached its time limit"],
    repeated_failure: ["failed", "last run was stopped: the same call kept failing"],
    budget_exceeded: ["failed", "last run used up its budget"],
    waiting: ["running", "a tool call waits for your approval"]
  };

  function $(id) { return document.getElementById(id); }
  function layout() { return document.querySelector(".layout"); }
  function drawerOpen() { var el = layout(); return !!el && el.classList.contains("drawer-open"); }

  // The drawer (phone widths only; on a desktop the list is always there). Opened by a
  // touch (``byTouch``), it takes the focus itself: its search box would raise the
  // on-screen keyboard over the list (README: the keyboard stays down until you tap a
  // text box). Opened from a keyboard or a mouse, the search box has it, ready to type.
  function setDrawer(open, returnFocus, byTouch) {
    var frame = layout(), toggle = $("sidebar-toggle"), main = document.querySelector("main.chat");
    if (!frame || !toggle) return;
    frame.classList.toggle("drawer-open", open);
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    var backdrop = $("drawer-backdrop");
    if (backdrop) backdrop.hidden = !open;
    // Keyboard and screen-reader focus stay in the open drawer, as in a modal dialog.
    if (main) main.inert = open;
    if (open) {
      var sidebar = $("sidebar");
      var first = byTouch ? sidebar :
        $("conversation-search-input") || document.querySelector("#sidebar a, #sidebar button");
      if (first === sidebar && sidebar) sidebar.tabIndex = -1;  // focusable, not in the Tab order
      if (first) first.focus();
    } else if (returnFocus) {
      toggle.focus();
    }
  }

  // A click made by a finger or a pen; one from Enter or Space has no pointer (Chromium:
  // pointerType "", detail 0), and then a coarse pointer says nothing about the keyboard.
  function touched(event) {
    if (event.pointerType) return event.pointerType !== "mouse";
    return event.detail > 0 && COARSE.matches;
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest("#sidebar-toggle")) { setDrawer(!drawerOpen(), true, touched(event)); return; }
    if (event.target.closest("#drawer-backdrop")) setDrawer(false, true);
  });
  PHONE.addEventListener("change", function () { if (!PHONE.matches && drawerOpen()) setDrawer(false, false); });

  // Esc: closes the open menu of a conversation, else the drawer. Marked as handled
  // (defaultPrevented) so that other Esc handlers of the page (stop a run) leave it.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented) return;
    var menu = event.target.closest && event.target.closest(".conversation-menu[open]");
    if (menu) {
      menu.open = false;
      menu.querySelector("summary").focus();
      event.preventDefault();
      return;
    }
    if (drawerOpen()) { setDrawer(false, true); event.preventDefault(); }
  });

  // One menu open at a time; a menu's body (rename and delete) is fetched the first time
  // it opens. Fetched from here rather than by an hx-trigger on the element: htmx attaches
  // that listener when it processes a swapped-in list, a moment after the swap, and a
  // menu opened in between (from the keyboard, right after a search) stayed empty.
  document.addEventListener("toggle", function (event) {
    var menu = event.target;
    if (!menu.classList || !menu.classList.contains("conversation-menu") || !menu.open) return;
    document.querySelectorAll(".conversation-menu[open]").forEach(function (other) {
      if (other !== menu) other.open = false;
    });
    var url = menu.getAttribute("data-menu-url");
    var body = menu.querySelector(".menu-body");
    if (!url || !body || menu.hasAttribute("data-menu-loading") || !window.htmx) return;
    menu.setAttribute("data-menu-loading", "");
    window.htmx.ajax("GET", url, { target: body, swap: "innerHTML" }).then(function () {
      menu.removeAttribute("data-menu-url");  // loaded: once, as before
    }).finally(function () {
      menu.removeAttribute("data-menu-loading");
    });
  }, true);

  // Enter in the search box searches now instead of reloading the page (htmx is there).
  document.addEventListener("submit", function (event) {
    if (event.target.id !== "conversation-search" || !window.htmx) return;
    event.preventDefault();
    window.htmx.trigger($("conversation-search-input"), "search");
  });

  // The list was re-rendered (a search, a rename, a delete): put focus back where the
  // person was working (the renamed row, or the rename box that has an error).
  function listReplaced() {
    var target = document.querySelector("#conversation-list [data-focus]");
    if (target) {
      var control = target.matches("input") ? target : target.querySelector(".conversation-link");
      if (control) control.focus();
      return;
    }
    if (document.activeElement === document.body || !document.activeElement) {
      var fallback = document.querySelector(".conversation-item.active .conversation-link") || $("conversation-search-input");
      if (fallback) fallback.focus();
    }
  }

  // The tab title follows the header's (the first message names the conversation; a
  // rename changes it).
  function syncTitle() {
    var heading = $("conversation-title");
    if (heading) document.title = heading.textContent.trim() + SUFFIX;
  }

  // The open conversation's marker follows its last run on this page.
  function syncMarker() {
    var item = document.querySelector(".conversation-item.active");
    var statuses = document.querySelectorAll("#messages .run-status[data-status]");
    if (!item || !statuses.length) return;
    var marker = item.querySelector(".marker");
    var last = statuses[statuses.length - 1];
    var status = last.getAttribute("data-status");
    // At the model-turn limit with an answer generated there: it has its answer.
    var run = last.closest(".run");
    if (status === "max_iterations" && run && run.querySelector(".turn.answer")) status = "";
    var found = MARKERS[status];
    if (!marker) return;
    marker.className = "marker" + (found ? " marker-" + found[0] : "");
    marker.textContent = "";
    if (found) {
      marker.title = found[1];
      var text = document.createElement("span");
      text.className = "visually-hidden";
      text.textContent = found[1];
      marker.appendChild(text);
    } else {
      marker.removeAttribute("title");
    }
  }

  function fitPlaceholder() {
    var input = $("composer-input");
    if (!input) return;
    if (!input.dataset.placeholderShort) input.dataset.placeholderShort = input.placeholder;
    var wide = input.getAttribute("data-placeholder-wide");
    input.placeholder = !PHONE.matches && wide ? wide : input.dataset.placeholderShort;
  }
  PHONE.addEventListener("change", fitPlaceholder);

  // On a phone the header's badges are one line that scrolls sideways (app.css): a
  // scrolling region is reached from the keyboard too, so it takes the focus there.
  function fitHeader() {
    var meta = document.querySelector(".chat-header .meta");
    if (!meta) return;
    if (PHONE.matches) meta.setAttribute("tabindex", "0");
    else meta.removeAttribute("tabindex");
  }
  PHONE.addEventListener("change", fitHeader);

  // The list's width: dragged by its handle or set with its arrow keys (WAI-ARIA's
  // window splitter pattern), kept in localStorage for every page of this browser.
  var WIDTH_KEY = "sidebar-width", WIDTH_DEFAULT = 260, WIDTH_MIN = 200, WIDTH_MAX = 560;
  var WIDTH_STEP = 16;

  function widthLimit() { return Math.max(WIDTH_MIN, Math.min(WIDTH_MAX, window.innerWidth - 420)); }

  function setWidth(px, save) {
    var frame = layout(), handle = $("sidebar-resizer");
    if (!frame || !handle) return;
    var width = Math.round(Math.max(WIDTH_MIN, Math.min(widthLimit(), px)));
    frame.style.setProperty("--sidebar-width", width + "px");
    handle.setAttribute("aria-valuenow", String(width));
    handle.setAttribute("aria-valuemax", String(widthLimit()));
    if (save) {
      try { localStorage.setItem(WIDTH_KEY, String(width)); } catch (e) { /* off or full */ }
    }
  }

  function currentWidth() {
    var sidebar = $("sidebar");
    return sidebar ? sidebar.getBoundingClientRect().width : WIDTH_DEFAULT;
  }

  function storedWidth() {
    try { return Number(localStorage.getItem(WIDTH_KEY)) || 0; } catch (e) { return 0; }
  }

  var dragging = null;
  document.addEventListener("pointerdown", function (event) {
    var handle = event.target.closest && event.target.closest("#sidebar-resizer");
    if (!handle || event.button !== 0) return;
    event.preventDefault();
    handle.setPointerCapture(event.pointerId);
    dragging = { left: $("sidebar").getBoundingClientRect().left, handle: handle };
    handle.classList.add("dragging");
    layout().classList.add("resizing");
  });
  document.addEventListener("pointermove", function (event) {
    if (dragging) setWidth(event.clientX - dragging.left, false);
  });
  function endDrag() {
    if (!dragging) return;
    dragging.handle.classList.remove("dragging");
    layout().classList.remove("resizing");
    dragging = null;
    setWidth(currentWidth(), true);
  }
  document.addEventListener("pointerup", endDrag);
  document.addEventListener("pointercancel", endDrag);
  document.addEventListener("dblclick", function (event) {
    if (event.target.closest && event.target.closest("#sidebar-resizer")) setWidth(WIDTH_DEFAULT, true);
  });
  document.addEventListener("keydown", function (event) {
    if (!event.target.closest || !event.target.closest("#sidebar-resizer")) return;
    var width = currentWidth(), step = event.shiftKey ? WIDTH_STEP * 4 : WIDTH_STEP;
    var next = { ArrowLeft: width - step, ArrowRight: width + step, Home: WIDTH_MIN,
                 End: widthLimit(), Enter: WIDTH_DEFAULT }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    setWidth(next, true);
  });
  window.addEventListener("resize", function () {
    if (!PHONE.matches && $("sidebar-resizer")) setWidth(storedWidth() || WIDTH_DEFAULT, false);
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (storedWidth()) setWidth(storedWidth(), false);
    fitPlaceholder();
    fitHeader();
    syncTitle();
    var header = document.querySelector(".chat-header");
    if (header) new MutationObserver(syncTitle).observe(header, {childList: true, subtree: true, characterData: true});
    var messages = $("messages");
    if (messages) {
      var queued = false;  // at most one check per frame while text streams in
      new MutationObserver(function () {
        if (queued) return;
        queued = true;
        window.requestAnimationFrame(function () { queued = false; syncMarker(); });
      }).observe(messages, {
        childList: true, subtree: true, attributes: true, attributeFilter: ["data-status"]
      });
    }
    var nav = document.querySelector("nav.conversations");
    if (nav) new MutationObserver(function () { listReplaced(); syncMarker(); }).observe(nav, {childList: true});
  });
})();
