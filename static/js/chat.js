// Small behaviours htmx does not cover: Enter to send, Esc to stop, the composer's button
// (Send, or Stop while a run goes), reset after send, keep the newest step in view, show
// the socket's state (and why the server closed it), fill in an example question. The
// character count is static/js/composer_count.js's.
(function () {
  "use strict";

  function composer() { return document.getElementById("composer"); }
  function input() { return document.getElementById("composer-input"); }
  function messages() { return document.getElementById("messages"); }

  var stickToBottom = true;
  var keptInView = null;  // a held call's decision form, while it is kept in view
  var SCROLL_KEYS = ["PageUp", "PageDown", "Home", "End", "ArrowUp", "ArrowDown", " "];
  // The text this tab sent and the server has not yet accepted or refused: the composer
  // keeps it until the server accepts it (a refused message, e.g. over the run limit,
  // must not lose its text).
  var pending = null;
  // Stop pressed on the composer's button: it says "Stopping…" until the run ends.
  var stopping = false;
  var stopSent = false;  // the frame just sent was that Stop (not a message)

  // A run of this conversation is going (its status line says so).
  function busy() {
    return !!document.querySelector('#messages .run-status[data-status="running"]');
  }

  // The id of the run this page shows going (running or waiting), "" for none: a Stop
  // names it, so a run that ended meanwhile is not followed by stopping the next one.
  function goingRunId() {
    var statuses = document.querySelectorAll(
      '#messages .run-status[data-status="running"], #messages .run-status[data-status="waiting"]');
    var last = statuses.length ? statuses[statuses.length - 1] : null;
    var found = last && /^run-(\d+)-status$/.exec(last.id);
    return found ? found[1] : "";
  }

  // A run of this conversation is going or waiting for a decision: a message is queued.
  function going() {
    return busy() || !!document.querySelector('#messages .run-status[data-status="waiting"]');
  }

  function showError(text) {
    var el = document.getElementById("chat-error");
    if (!el) return;
    el.textContent = text;
    el.classList.toggle("visible", !!text);
  }

  function sendButton() { return document.getElementById("send"); }

  // One button: Send, or Stop while a run of the conversation goes (a run that waits for a
  // decision is stopped from its status line), or Queue while it goes and the composer
  // holds text (docs/queue.md: the message waits under the exchange; Esc still stops).
  // Stop sends {"type": "cancel"}, as the status line's Stop did; "Stopping…" until the
  // run ends, aria-disabled rather than disabled so the keyboard focus stays on it.
  function updateComposer() {
    var form = composer();
    if (!form) return;
    var isBusy = busy();
    if (!isBusy) stopping = false;
    form.classList.toggle("busy", isBusy);
    // Stop needs no text: the browser's check of the required textarea would block it.
    form.noValidate = isBusy;
    var button = sendButton();
    if (!button) return;
    var typed = !!(input() && input().value.trim());
    if (going() && typed && !stopping) {
      button.setAttribute("data-mode", "queue");
      button.textContent = "Queue";
      button.removeAttribute("aria-disabled");
      button.title = "Send when the run ends: the message waits under the exchange, where " +
        "it can be removed or sent now (Esc stops the run)";
      button.removeAttribute("aria-keyshortcuts");
    } else if (isBusy) {
      button.setAttribute("data-mode", "stop");
      button.textContent = stopping ? "Stopping…" : "Stop";
      button.disabled = false;
      if (stopping) button.setAttribute("aria-disabled", "true");
      else button.removeAttribute("aria-disabled");
      button.title = "Stop the agent (Esc): the model call and tool calls still going are " +
        "cancelled; what was done is kept";
      button.setAttribute("aria-keyshortcuts", "Escape");
    } else {
      button.setAttribute("data-mode", "send");
      button.textContent = "Send";
      button.removeAttribute("aria-disabled");
      button.removeAttribute("title");
      button.removeAttribute("aria-keyshortcuts");
    }
  }

  // Typing while a run goes turns Stop into Queue, and clearing the text turns it back.
  document.addEventListener("input", function (event) {
    if (event.target === input()) updateComposer();
  });

  // The composer's text changed without a key (an example, cleared once sent): the
  // character count (composer_count.js) follows input events.
  function textChanged() {
    input().dispatchEvent(new Event("input", {bubbles: true}));
  }

  function isStop(element) {
    return !!(element && element.closest && element.closest(".stop-form"));
  }

  function approvalForm(element) {
    return element && element.closest ? element.closest("[data-approval-form]") : null;
  }

  // An answer's thumbs and comment (static/js/feedback.js): sent whatever a run is doing.
  function feedbackForm(element) {
    return !!(element && element.closest && element.closest("[data-feedback-form]"));
  }

  // A queued message's Remove and "Stop and send now" (templates/chat/_queue.html).
  function queueForm(element) {
    return !!(element && element.closest && element.closest(".queued-actions"));
  }

  // Send while the connection is down: the ws extension would keep the frame and send
  // it on reconnect (a copy per press). Say so at once and keep the text instead; a
  // message goes with an id of its own (the same for the same text until the server
  // answers), so a copy the server gets twice is stored once (chat/store/queue.py).
  var socketOpen = false;
  var sentId = null;  // the client_id of `pending`
  var OFFLINE_MESSAGE = "Not sent: the live connection is down (reconnecting…). Your text " +
    "is kept; send it again once the header says live.";
  var OFFLINE_STOP = "Not sent: the live connection is down (reconnecting…). Press it " +
    "again once the header says live.";
  document.addEventListener("htmx:wsOpen", function () {
    socketOpen = true;
    // Back online: the notice's advice is followed by sending again.
    var notice = document.getElementById("chat-error");
    if (notice && (notice.textContent === OFFLINE_MESSAGE || notice.textContent === OFFLINE_STOP)) {
      showError("");
    }
  });
  document.addEventListener("htmx:wsClose", function () { socketOpen = false; });

  // A (re)connecting page names the runs it still shows running or waiting
  // (`going=3,7`, the newest 20): one may have ended while it was away, with the queue's
  // next run started since, and the catch-up sends those again too; and the newest run
  // it shows (`last=12`, 0 for none): if the branch's latest is another, the catch-up
  // sends the whole list (chat/frames.py, parse_going and parse_last).
  // htmx.createWebSocket is the ws extension's hook for this.
  var MAX_GOING = 20;
  var createWebSocket = window.htmx && window.htmx.createWebSocket;
  if (createWebSocket) {
    window.htmx.createWebSocket = function (url) {
      var shown = document.querySelectorAll(
        '#messages .run-status[data-status="running"], #messages .run-status[data-status="waiting"]');
      var ids = [];
      shown.forEach(function (status) {
        var found = /^run-(\d+)-status$/.exec(status.id);
        if (found) ids.push(found[1]);
      });
      ids = ids.slice(-MAX_GOING);
      var runs = document.querySelectorAll("#messages section.run[id^='run-']");
      var last = runs.length ? runs[runs.length - 1].id.slice(4) : "0";
      url += (url.indexOf("?") < 0 ? "?" : "&") + "last=" + last;
      if (ids.length) url += "&going=" + ids.join(",");
      return createWebSocket(url);
    };
  }

  function clientId(text) {
    if (pending !== null && sentId && text === pending) return sentId;
    var bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) {
      return ("0" + b.toString(16)).slice(-2);
    }).join("");
  }

  // A frame pressed while offline is not kept for the reconnect: said here, not sent.
  // A Stop kept for later would stop whatever runs then (the queue's next, say).
  function refusedOffline(event, notice) {
    if (socketOpen) return false;
    var trigger = event.detail && event.detail.triggeringEvent;
    if (trigger) trigger.preventDefault();  // no native form submit either
    event.preventDefault();
    // Closed for good (FINAL_CLOSES): its notice, already shown, says what to do.
    var connection = document.getElementById("connection");
    if (!connection || connection.getAttribute("data-state") !== "ended") showError(notice);
    return true;
  }

  // The composer's message: refused here while offline, else sent with its client_id.
  function configMessage(event) {
    if (refusedOffline(event, OFFLINE_MESSAGE)) return;
    sentId = clientId(input().value);
    event.detail.parameters.client_id = sentId;
  }

  document.addEventListener("htmx:wsConfigSend", function (event) {
    var form = approvalForm(event.target);
    if (form) {
      // A decision on a held tool call: which button sent it, and once. The card
      // coming back (in every tab) replaces the form; a refusal re-enables it.
      var trigger = event.detail && event.detail.triggeringEvent;
      var submitter = trigger && trigger.submitter;
      event.detail.parameters.decision = submitter ? submitter.value : "approve";
      form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      form.setAttribute("data-sent", "");
      return;
    }
    if (feedbackForm(event.target)) return;
    if (event.target.closest && event.target.closest("[data-branch-form]")) {
      // A retry, regenerate or edit: refused while offline as a message is, and not the
      // composer's message (its client_id stays the composer's text's).
      refusedOffline(event, OFFLINE_MESSAGE);
      return;
    }
    if (queueForm(event.target)) {  // "Stop and send now" stops the run going
      if (refusedOffline(event, OFFLINE_STOP)) return;
      var shown = goingRunId();
      if (event.detail.parameters.type === "steer" && shown) event.detail.parameters.run = shown;
      return;
    }
    if (event.target === composer()) {
      var sentBy = event.detail && event.detail.triggeringEvent &&
        event.detail.triggeringEvent.submitter;
      if (busy() && sentBy === sendButton() && sendButton().getAttribute("data-mode") === "stop") {
        if (stopping) {  // sent once: the run's end turns the button back into Send
          event.detail.triggeringEvent.preventDefault();
          event.preventDefault();
          return;
        }
        if (refusedOffline(event, OFFLINE_STOP)) return;
        // The button is Stop: the frame is a cancel, and the text stays where it is.
        event.detail.parameters = {type: "cancel", run: goingRunId()};
        stopping = true;
        stopSent = true;
        updateComposer();
        return;
      }
    }
    if (isStop(event.target)) {
      if (refusedOffline(event, OFFLINE_STOP)) return;
      // Stop: sent once; the button waits for the run's end to replace it.
      var button = event.target.querySelector("button");
      if (button) { button.disabled = true; button.textContent = "Stopping…"; }
      return;
    }
    // A message sent while a run goes is queued by the server (chat/store/queue.py).
    configMessage(event);
  });

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
    textChanged();
    input().focus();
  });

  document.addEventListener("scroll", function (event) {
    var box = messages();
    if (event.target !== box) return;
    stickToBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  }, true);

  // The person scrolling the messages themselves (wheel, touch, the keys that scroll)
  // takes over from a held call's card kept in view (see scrollDown).
  function scrolledByHand(event) {
    var box = messages();
    if (!box || !box.contains(event.target)) return;
    if (event.type === "keydown") {
      if (SCROLL_KEYS.indexOf(event.key) === -1 || event.target.closest("textarea, input, select")) return;
    }
    keptInView = null;
  }
  ["wheel", "touchmove", "keydown"].forEach(function (kind) {
    document.addEventListener(kind, scrolledByHand, { passive: true, capture: true });
  });

  // The list's box shrinks when the queue under it grows (and on a phone's keyboard): a
  // reader following the bottom keeps it, the newest status line and its Stop in view.
  if (window.ResizeObserver) {
    document.addEventListener("DOMContentLoaded", function () {
      var box = messages();
      if (!box) return;
      new ResizeObserver(function () {
        var bottom = box.scrollHeight - box.clientHeight;
        if (keptInView && keptInView.isConnected) {
          // A held call's card is kept in view: go to the bottom (its status line and
          // Stop) only when the card's top stays on screen there.
          var top = keptInView.getBoundingClientRect().top - (bottom - box.scrollTop);
          if (top >= box.getBoundingClientRect().top) box.scrollTop = bottom;
          return;
        }
        if (stickToBottom) box.scrollTop = bottom;
      }).observe(box);
    });
  }

  function scrollDown() {
    var box = messages();
    if (!box) return;
    // A call that waits for a decision is what the reader must see: its card is kept in
    // view (centred) while the turn's other calls, before and after it in the model's
    // order, open their results around it, until the person scrolls or it is decided;
    // the page stops following the bottom until they scroll back there.
    var fresh = box.querySelectorAll("[data-approval-form]:not([data-shown])");
    fresh.forEach(function (form) { form.setAttribute("data-shown", ""); });
    if (fresh.length && !(keptInView && keptInView.isConnected)) {
      keptInView = fresh[0];
      stickToBottom = false;
    }
    if (keptInView && keptInView.isConnected) {
      keptInView.scrollIntoView({ block: "center" });
      return;
    }
    keptInView = null;
    if (stickToBottom) box.scrollTop = box.scrollHeight;
  }

  function setConnection(state, text) {
    var el = document.getElementById("connection");
    if (!el) return;
    el.setAttribute("data-state", state);
    el.textContent = text;
  }

  // The status of an ended run element (its status line's data-status), or null for a
  // running run or any other element.
  function endedStatus(element) {
    if (!element.classList || !element.classList.contains("run")) return null;
    var line = element.querySelector(".run-status");
    var status = line && line.getAttribute("data-status");
    return status && status !== "running" ? status : null;
  }

  // Appends are idempotent: an element whose id is already on the page replaces it
  // (a page that connects mid-run is sent the run again, and may already have parts).
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var detail = event.detail;
    var fragment = detail && detail.fragment;
    if (!fragment) return;
    // A text delta carries where it starts; a page that is behind (it was rendered from
    // an older snapshot) skips deltas until the next whole-text snapshot replaces it.
    var offset = fragment.getAttribute && fragment.getAttribute("data-offset");
    if (offset !== null && offset !== undefined && detail.target) {
      if (detail.target.textContent.length !== Number(offset)) detail.shouldSwap = false;
      return;
    }
    if (!fragment.firstElementChild) return;
    var incoming = fragment.firstElementChild;
    if (!incoming.id || incoming === fragment) return;
    var existing = document.getElementById(incoming.id);
    if (!existing || existing === detail.target) return;
    // An ended run is final: the catch-up of a socket that connects or reconnects sends
    // it again unchanged, and replacing it would fold away the earlier steps the reader
    // loaded ("Show the N earlier steps") and drop the keyboard focus inside it.
    var ended = endedStatus(existing);
    if (ended && ended === endedStatus(incoming)) {
      detail.shouldSwap = false;
      return;
    }
    existing.replaceWith(incoming);
    if (window.htmx) window.htmx.process(incoming);
    detail.shouldSwap = false;
  });

  // Closes in a row without the socket opening in between: past FAILED_CLOSES the
  // status says the server cannot be reached (still retrying: it may be restarting).
  var failedCloses = 0;
  var FAILED_CLOSES = 3;
  document.addEventListener("htmx:wsOpen", function () {
    failedCloses = 0;
    setConnection("open", "live");
  });
  // The server's own close codes (chat/consumers.py, chat/security.py) end the socket for
  // good (the extension does not reconnect after them): say what is wrong, in the header
  // and at the composer, instead of "reconnecting…" forever. Daphne sends no close
  // reason, so the code is the whole message; the server's log (chat.sockets) has more.
  var FINAL_CLOSES = {
    4401: ["signed out: reload the page",
           "Your session has ended (you logged out, or logged in again elsewhere). " +
           "Reload the page to go on."],
    4403: ["refused: origin not allowed",
           "The server refused the live connection from this address (" + location.origin +
           "): it is not in the server's allowed origins. Whoever runs the server must add " +
           "it to DJANGO_CSRF_TRUSTED_ORIGINS or make its proxy pass the Host header " +
           "(docs/configuration.md)."],
    4404: ["not found: reload the page",
           "This conversation is not yours in this session (logged in as someone else?). " +
           "Reload the page."],
    4410: ["deleted: start a new chat",
           "This conversation was deleted (in another tab or window). Its runs are kept " +
           "for audit; a run it had going was stopped. Start a new chat to go on."],
    4429: ["too many messages: reload the page",
           "The connection was closed because this page sent too many messages at once. " +
           "Reload the page."]
  };
  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail && event.detail.event && event.detail.event.code;
    var final = FINAL_CLOSES[code];
    if (final) {
      setConnection("ended", final[0]);
      showError(final[1]);
      return;
    }
    failedCloses += 1;
    setConnection("closed", failedCloses >= FAILED_CLOSES
      ? "reconnecting… (the server cannot be reached)" : "reconnecting…");
  });

  // A dialog or drawer that is open takes Esc for itself.
  function dialogOpen() {
    var open = document.querySelectorAll("dialog[open], [aria-modal='true']");
    for (var i = 0; i < open.length; i++) {
      if (open[i].getClientRects().length) return true;
    }
    return false;
  }

  // Esc stops the run going on (running, or waiting for a decision) wherever the focus
  // is. Listened for on window, so every element's and the document's handlers run
  // first: one that used the key (a drawer closing) calls preventDefault, and then the
  // run goes on.
  window.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
    if (dialogOpen()) return;
    // Esc in the conversation list (its search box, a rename box) is theirs: a search
    // field clears itself; the run goes on.
    // So is Esc on a held call's card (its summary, Copy, the decision's form): someone
    // there is deciding on the call, not stopping the run (the card's Deny and the Stop
    // button are there for that); and on an answer's thumbs and comment.
    var target = event.target;
    var theirs = ".sidebar, [data-approval-form], .tool-card[data-status='pending'], .feedback";
    if (target && target.closest && target.closest(theirs)) return;
    var stop = document.querySelector(
      "#send[data-mode='stop']:not([aria-disabled='true']), #send[data-mode='queue']," +
      " #messages .run-status[data-status='waiting'] .stop-form button:not([disabled])");
    if (!stop) return;
    event.preventDefault();
    // The button queues while text is typed; Esc stops all the same (the text stays).
    if (stop.getAttribute("data-mode") === "queue") stop.setAttribute("data-mode", "stop");
    stop.click();
  });
  // Enter in a held call's reason field denies the call: the field is the denial's
  // reason, and the browser's implicit submission would press the form's first button,
  // Approve (running the call the person was giving a reason not to run).
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Enter" || event.defaultPrevented || event.isComposing) return;
    var field = event.target;
    if (!field || !field.matches || !field.matches("[data-approval-form] input[name=reason]")) {
      return;
    }
    event.preventDefault();
    var deny = field.form && field.form.querySelector("button.deny:not([disabled])");
    if (deny) deny.click();
  });
  document.addEventListener("htmx:wsAfterSend", function (event) {
    if (isStop(event.target) || approvalForm(event.target) || feedbackForm(event.target) ||
        queueForm(event.target)) return;
    // A retry, regenerate or edit (docs/branches.md) sends nothing from the composer.
    if (event.target.closest && event.target.closest("[data-branch-form]")) return;
    if (stopSent) { stopSent = false; return; }
    pending = input().value;
    stickToBottom = true;
  });
  // The server says what became of a frame in the data-outcome of the element that says
  // so (chat/fragments.py), read here as htmx swaps that element in.
  document.addEventListener("htmx:load", function (event) {
    var element = event.target;
    var outcome = element && element.getAttribute && element.getAttribute("data-outcome");
    if (outcome === "message-accepted") {
      // Every tab hears of a message accepted: another tab's leaves this one's composer
      // (its own message may yet be refused, and its text must stay for another try).
      var accepted = element.getAttribute("data-client-id");
      if (accepted && accepted !== sentId) return;
      // Clear what was sent, unless the person has typed something else since.
      if (pending !== null && input() && input().value === pending) input().value = "";
      pending = null;
      textChanged();
    } else if (outcome === "message-refused") {
      pending = null;  // the text stays for another try
    } else if (outcome === "decision-refused") {
      // Said beside the card's buttons: that form, if still there, can be used again.
      // Other notices (a message refused while the decision goes through) leave sent
      // forms as they are.
      var form = element.closest("[data-approval-form][data-sent]");
      if (!form) return;
      form.removeAttribute("data-sent");
      form.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
    }
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    updateComposer();
    scrollDown();
  });
  document.addEventListener("DOMContentLoaded", function () {
    updateComposer();
    var target = location.hash && document.getElementById(location.hash.slice(1));
    if (target) {
      // Opened on one run (the admin's "as the user saw it" link): show that run.
      stickToBottom = false;
      target.scrollIntoView({block: "start"});
    } else {
      stickToBottom = true;
      scrollDown();
    }
    // The composer takes the focus, but not on a phone or a touch screen, where focus
    // opens the on-screen keyboard over the conversation just opened.
    if (input() && !window.matchMedia("(max-width: 720px), (pointer: coarse)").matches) {
      input().focus();
    }
  });
})();
