/* Keyboard for the CharToM-QA board and its two list reviews (nothing needed without it).
 *
 * Board: 1–7 press the Start button of that queue.
 *
 * Bonus point review: the list lives here as an array; the server gets the final list
 * (points_json) and the log of what was done to it (operations_json). Two modes:
 * a point is selected (the <li> has focus) or being edited (its textarea has focus).
 *   ↑ / ↓           select the previous / next point
 *   Alt+↑ / Alt+↓   move the selected point (also while editing)
 *   E or Enter      edit it; Esc or Enter ends editing
 *   S               split at the caret (where it was left in the point's text);
 *                   Alt+S does the same while editing
 *   M               merge with the next point
 *   Del / Backspace delete the point
 *   A               add an empty point after it, and edit it
 *   Ctrl+Enter      submit
 * Offsets in the log ("at" of a split) count code points, as the server's do.
 *
 * Distractor review: 1–3 go to a choice, Esc leaves it, Ctrl+Enter publishes.
 */
(function () {
  "use strict";

  function typing(target) {
    return target && (target.tagName === "TEXTAREA" || target.tagName === "SELECT" ||
      (target.tagName === "INPUT" && target.type !== "checkbox" && target.type !== "radio"));
  }

  function codePoints(text) {
    return Array.from(text).length;
  }

  function submitOnce(form) {
    if (form.dataset.submitting) return;
    form.dataset.submitting = "1";
    form.requestSubmit();
  }

  // --- the board ------------------------------------------------------------------

  function initBoard() {
    if (!document.getElementById("task-cards")) return;
    document.addEventListener("keydown", function (event) {
      if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
      if (typing(event.target) || !/^[1-9]$/.test(event.key)) return;
      var start = document.querySelector('#task-cards [data-start-key="' + event.key + '"]');
      if (!start) return;
      event.preventDefault();
      start.click();
    });
  }

  // --- the bonus point editor --------------------------------------------------------

  function initBonusEditor() {
    var form = document.getElementById("bonus-form");
    var data = document.getElementById("bonus-points-data");
    if (!form || !data) return;
    var editor = form.querySelector("#point-editor");
    var list = form.querySelector("#point-list");
    var status = form.querySelector("#editor-status");
    var opsInput = form.querySelector("#operations-json");
    var pointsInput = form.querySelector("#points-json");
    var points = JSON.parse(data.textContent).map(String);
    var ops = [];
    try {
      // A refused submit comes back with the log so far: keep it.
      if (opsInput.value) ops = JSON.parse(opsInput.value);
    } catch (e) {
      ops = [];
    }
    var selected = 0;
    var editing = null; // {index, before} while a textarea has focus

    form.querySelector(".nojs-editor").hidden = true;
    editor.hidden = false;

    function say(text, isError) {
      status.textContent = text;
      status.className = "save-status" + (isError ? " editor-error" : "");
    }

    function item(index) {
      return list.querySelector('li[data-index="' + index + '"]');
    }

    function tool(label, action, title) {
      var b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.dataset.action = action;
      b.title = title;
      b.tabIndex = -1; // the keys do the same; Tab stays on the points
      return b;
    }

    function render(focus, caret) {
      list.textContent = "";
      points.forEach(function (text, i) {
        var li = document.createElement("li");
        li.className = "point" + (i === selected ? " selected" : "");
        li.dataset.index = String(i);
        li.tabIndex = i === selected ? 0 : -1;
        li.setAttribute("aria-label", "Point " + (i + 1) + ": " + text);
        var area = document.createElement("textarea");
        area.rows = 2;
        area.value = text;
        area.setAttribute("aria-label", "Text of point " + (i + 1));
        area.tabIndex = -1;
        li.appendChild(area);
        var tools = document.createElement("div");
        tools.className = "point-tools";
        tools.appendChild(tool("↑", "up", "Move up (Alt+↑)"));
        tools.appendChild(tool("↓", "down", "Move down (Alt+↓)"));
        tools.appendChild(tool("Merge ↓", "merge", "Merge with the next point (M)"));
        tools.appendChild(tool("Split", "split", "Split at the caret (S)"));
        tools.appendChild(tool("Delete", "delete", "Delete (Del)"));
        li.appendChild(tools);
        list.appendChild(li);
      });
      var li = item(selected);
      if (!li) {
        say("No point left: add one (A or the button) before submitting.", true);
        if (focus) form.querySelector("#add-point").focus();
        return;
      }
      if (focus === "edit") {
        var area = li.querySelector("textarea");
        area.focus();
        var at = caret === undefined ? area.value.length : caret;
        area.setSelectionRange(at, at);
      } else if (focus === "item") {
        li.focus();
      }
    }

    function select(index) {
      if (index < 0 || index >= points.length) return;
      selected = index;
      list.querySelectorAll("li.point").forEach(function (li) {
        var mine = Number(li.dataset.index) === index;
        li.classList.toggle("selected", mine);
        li.tabIndex = mine ? 0 : -1;
      });
    }

    function commitEdit() {
      if (!editing) return;
      var index = editing.index;
      if (points[index] !== editing.before) {
        ops.push({ op: "edit", index: index, before: editing.before, after: points[index] });
        say("Edited point " + (index + 1) + ".");
      }
      editing = null;
    }

    function move(index, delta) {
      commitEdit();
      var to = index + delta;
      if (to < 0 || to >= points.length) return say("Already at the " + (delta < 0 ? "top." : "bottom."), true);
      var moved = points.splice(index, 1)[0];
      points.splice(to, 0, moved);
      ops.push({ op: "move", from: index, to: to });
      selected = to;
      say("Moved point " + (index + 1) + " to " + (to + 1) + ".");
      render("item");
    }

    function merge(index) {
      commitEdit();
      if (index + 1 >= points.length) return say("There is no next point to merge with.", true);
      var joined = (points[index].trim() + " " + points[index + 1].trim()).trim();
      points.splice(index, 2, joined);
      ops.push({ op: "merge", index: index });
      selected = index;
      say("Merged points " + (index + 1) + " and " + (index + 2) + ".");
      render("item");
    }

    function split(index, at) {
      commitEdit();
      var text = points[index];
      var left = text.slice(0, at).trim();
      var right = text.slice(at).trim();
      if (!left || !right) {
        return say("Put the caret inside the text where the point should be split (E to edit).", true);
      }
      points.splice(index, 1, left, right);
      ops.push({ op: "split", index: index, at: codePoints(text.slice(0, at)) });
      selected = index + 1;
      say("Split point " + (index + 1) + " in two.");
      render("item");
    }

    function remove(index) {
      commitEdit();
      var removed = points.splice(index, 1)[0];
      ops.push({ op: "delete", index: index, text: removed });
      selected = Math.max(0, Math.min(index, points.length - 1));
      say("Deleted point " + (index + 1) + ".");
      render("item");
    }

    function add(index) {
      commitEdit();
      var at = points.length ? index + 1 : 0;
      points.splice(at, 0, "");
      ops.push({ op: "add", index: at });
      selected = at;
      say("Added point " + (at + 1) + ".");
      render("edit");
    }

    function caretOf(index) {
      var area = item(index).querySelector("textarea");
      return area.selectionStart;
    }

    list.addEventListener("focusin", function (event) {
      var li = event.target.closest("li.point");
      if (!li) return;
      var index = Number(li.dataset.index);
      select(index);
      if (event.target.tagName === "TEXTAREA" && (!editing || editing.index !== index)) {
        commitEdit();
        editing = { index: index, before: points[index] };
      }
    });

    list.addEventListener("focusout", function (event) {
      if (event.target.tagName === "TEXTAREA") commitEdit();
    });

    list.addEventListener("input", function (event) {
      var li = event.target.closest("li.point");
      if (li && event.target.tagName === "TEXTAREA") {
        points[Number(li.dataset.index)] = event.target.value;
        li.setAttribute("aria-label", "Point " + (Number(li.dataset.index) + 1) + ": " + event.target.value);
      }
    });

    list.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-action]");
      if (!button) return;
      var index = Number(button.closest("li.point").dataset.index);
      var action = button.dataset.action;
      if (action === "up") move(index, -1);
      else if (action === "down") move(index, 1);
      else if (action === "merge") merge(index);
      else if (action === "split") split(index, caretOf(index));
      else if (action === "delete") remove(index);
    });

    list.addEventListener("keydown", function (event) {
      var li = event.target.closest("li.point");
      if (!li || event.isComposing || event.ctrlKey || event.metaKey) return;
      var index = Number(li.dataset.index);
      var inText = event.target.tagName === "TEXTAREA";
      var key = event.key;
      var handled = true;
      if (event.altKey && (key === "ArrowUp" || key === "ArrowDown")) {
        move(index, key === "ArrowUp" ? -1 : 1);
      } else if (inText) {
        if (event.altKey && (key === "s" || key === "S")) split(index, event.target.selectionStart);
        else if (key === "Escape" || (key === "Enter" && !event.shiftKey)) {
          commitEdit();
          li.focus();
        } else handled = false;
      } else if (event.altKey) {
        handled = false;
      } else if (key === "ArrowUp" || key === "ArrowDown") {
        var next = index + (key === "ArrowUp" ? -1 : 1);
        if (next >= 0 && next < points.length) {
          select(next);
          item(next).focus();
        }
      } else if (key === "e" || key === "E" || key === "Enter") {
        var area = li.querySelector("textarea");
        area.focus();
        area.setSelectionRange(area.value.length, area.value.length);
      } else if (key === "s" || key === "S") split(index, caretOf(index));
      else if (key === "m" || key === "M") merge(index);
      else if (key === "Delete" || key === "Backspace") remove(index);
      else if (key === "a" || key === "A") add(index);
      else handled = false;
      if (handled) event.preventDefault();
    });

    form.querySelector("#add-point").addEventListener("click", function () {
      add(points.length ? selected : 0);
    });

    // On the whole page, so the keys work wherever the focus was left (e.g. the plot).
    document.addEventListener("keydown", function (event) {
      if (event.defaultPrevented || event.isComposing) return;
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        submitOnce(form);
      } else if ((event.key === "a" || event.key === "A") && !typing(event.target) &&
                 !points.length && !event.ctrlKey && !event.metaKey && !event.altKey) {
        event.preventDefault();
        add(0);
      }
    });

    form.addEventListener("submit", function () {
      commitEdit();
      pointsInput.value = JSON.stringify(points);
      opsInput.value = JSON.stringify(ops);
      form.querySelector("#points-text").value = points.join("\n");
    });

    render("item");
  }

  // --- the distractor review ---------------------------------------------------------

  function initDistractors() {
    var form = document.getElementById("distractor-form");
    if (!form) return;
    document.addEventListener("keydown", function (event) {
      if (event.defaultPrevented || event.isComposing) return;
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        submitOnce(form);
        return;
      }
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      if (event.key === "Escape" && typing(event.target)) {
        event.target.blur();
        return;
      }
      if (typing(event.target) || !/^[1-3]$/.test(event.key)) return;
      var area = form.querySelector('[data-choice-key="' + event.key + '"]');
      if (!area) return;
      event.preventDefault();
      area.focus();
      area.setSelectionRange(area.value.length, area.value.length);
    });
    var first = form.querySelector("[data-choice-key]");
    if (first && !document.querySelector("[autofocus]")) first.focus();
  }

  function init() {
    initBoard();
    initBonusEditor();
    initDistractors();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
