/* CharToM-QA construction screens: span selection, live diff, keyboard.
 *
 * Offsets: the server renders the note as tokens (words, spaces, single grapheme
 * clusters such as an emoji) each carrying its code-point offsets in data-s/data-e
 * (annotation/chartom/spans.py). This script never measures JavaScript strings, which
 * count UTF-16 units: a fragment is always [data-s of its first token, data-e of its
 * last], so it cannot split a surrogate pair or a combining sequence.
 *
 * Span widget (focus on the note text):
 *   ← →            move the caret word by word (Home / End: first / last)
 *   Shift+← →      extend the selection from where it started
 *   Enter          add the selection (or the caret's word) as a fragment
 *   Esc            cancel the selection
 *   Backspace      remove the last fragment;  1–9 remove that fragment
 *   0              "no key note" on/off
 *   mouse          select text: the words it touches become a fragment
 * Edit forms: A accept, E edit, Esc leaves the text box, 1–4 pick a candidate.
 * Everywhere: Ctrl+Enter submits.
 */
(function () {
  "use strict";

  function toArray(list) {
    return Array.prototype.slice.call(list);
  }

  function typing(target) {
    return target && (target.tagName === "TEXTAREA" ||
      (target.tagName === "INPUT" && /^(text|search|number)$/.test(target.type)));
  }

  function submitOnce(form) {
    if (!form || form.dataset.submitting) return;
    form.dataset.submitting = "1";
    form.requestSubmit();
  }

  // --- span widget ---------------------------------------------------------------

  function SpanWidget(root) {
    var box = root.querySelector("#note-text");
    var input = root.querySelector("#spans");
    var list = root.querySelector("#span-list");
    var empty = root.querySelector("#span-list-empty");
    var noKey = root.querySelector("#no-key-note");
    var readonly = root.hasAttribute("data-readonly");
    var tokens = toArray(box.querySelectorAll(".tok"));
    var words = tokens.filter(function (t) { return !t.classList.contains("tok-space"); });
    var spans = [];
    try { spans = JSON.parse(input.value || "[]"); } catch (e) { spans = []; }
    var caret = 0;
    var anchor = null;

    function start(t) { return Number(t.dataset.s); }
    function end(t) { return Number(t.dataset.e); }

    function spaceOnly(from, to) {
      // True when every token between the offsets is a space: fragments that far
      // apart are one fragment (the server merges them the same way).
      return tokens.every(function (t) {
        return end(t) <= from || start(t) >= to || t.classList.contains("tok-space");
      });
    }

    function merged(items) {
      var sorted = items.slice().sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
      var out = [];
      sorted.forEach(function (span) {
        var last = out[out.length - 1];
        if (last && (span[0] <= last[1] || spaceOnly(last[1], span[0]))) {
          last[1] = Math.max(last[1], span[1]);
        } else {
          out.push([span[0], span[1]]);
        }
      });
      return out;
    }

    function textOf(span) {
      return tokens.filter(function (t) { return start(t) >= span[0] && end(t) <= span[1]; })
        .map(function (t) { return t.textContent; }).join("");
    }

    function render() {
      tokens.forEach(function (t) {
        var inside = spans.some(function (s) { return start(t) >= s[0] && end(t) <= s[1]; });
        t.classList.toggle("is-span", inside);
      });
      list.textContent = "";
      spans.forEach(function (span, i) {
        var li = document.createElement("li");
        var text = document.createElement("span");
        text.className = "frag";
        text.textContent = textOf(span);
        li.appendChild(text);
        if (!readonly) {
          var remove = document.createElement("button");
          remove.type = "button";
          remove.className = "secondary small";
          remove.textContent = "Remove";
          remove.setAttribute("aria-label", "Remove fragment " + (i + 1));
          remove.addEventListener("click", function () { removeAt(i); box.focus(); });
          li.appendChild(remove);
        }
        list.appendChild(li);
      });
      if (empty) empty.hidden = spans.length > 0;
      input.value = JSON.stringify(spans);
    }

    function paint() {
      var lo = anchor === null ? caret : Math.min(anchor, caret);
      var hi = anchor === null ? caret : Math.max(anchor, caret);
      var from = words.length ? start(words[lo]) : 0;
      var to = words.length ? end(words[hi]) : 0;
      tokens.forEach(function (t) {
        t.classList.remove("is-caret");
        t.classList.toggle("is-pending", anchor !== null && start(t) >= from && end(t) <= to);
      });
      if (words[caret]) {
        words[caret].classList.add("is-caret");
        box.setAttribute("aria-label", "Note text, caret on: " + words[caret].textContent);
      }
    }

    function add(from, to) {
      if (readonly || from >= to) return;
      spans = merged(spans.concat([[from, to]]));
      if (noKey) noKey.checked = false;
      render();
    }

    function removeAt(i) {
      if (readonly || i < 0 || i >= spans.length) return;
      spans.splice(i, 1);
      render();
    }

    function addPending() {
      if (!words.length) return;
      var lo = anchor === null ? caret : Math.min(anchor, caret);
      var hi = anchor === null ? caret : Math.max(anchor, caret);
      add(start(words[lo]), end(words[hi]));
      anchor = null;
      paint();
    }

    box.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
      var key = event.key;
      var handled = true;
      if (key === "ArrowRight" || key === "ArrowLeft" || key === "Home" || key === "End") {
        if (event.shiftKey && anchor === null) anchor = caret;
        if (!event.shiftKey) anchor = null;
        if (key === "ArrowRight") caret = Math.min(words.length - 1, caret + 1);
        if (key === "ArrowLeft") caret = Math.max(0, caret - 1);
        if (key === "Home") caret = 0;
        if (key === "End") caret = words.length - 1;
        paint();
      } else if (key === "Enter") {
        addPending();
      } else if (key === "Escape") {
        anchor = null;
        paint();
      } else if (key === "Backspace" || key === "Delete") {
        removeAt(spans.length - 1);
      } else if (/^[1-9]$/.test(key)) {
        removeAt(Number(key) - 1);
      } else if (key === "0" && noKey && !noKey.disabled) {
        noKey.checked = !noKey.checked;
        noKey.dispatchEvent(new Event("change", { bubbles: true }));
      } else {
        handled = false;
      }
      if (handled) event.preventDefault();
    });

    if (noKey) {
      noKey.addEventListener("change", function () {
        if (noKey.checked) {
          spans = [];
          render();
        }
      });
    }

    function tokenAt(node, offset, atEnd) {
      // The token a range boundary falls in; a boundary between tokens belongs to the
      // token on the selection's side.
      if (node === box) {
        var child = box.children[atEnd ? offset - 1 : offset];
        return child || null;
      }
      var el = node.nodeType === 1 ? node : node.parentElement;
      var tok = el && el.closest ? el.closest(".tok") : null;
      if (!tok || !box.contains(tok)) return null;
      var length = node.nodeType === 3 ? node.length : 0;
      if (!atEnd && node.nodeType === 3 && offset >= length) return tok.nextElementSibling;
      if (atEnd && node.nodeType === 3 && offset === 0) return tok.previousElementSibling;
      return tok;
    }

    box.addEventListener("mouseup", function () {
      if (readonly) return;
      var selection = window.getSelection();
      if (!selection || selection.rangeCount === 0) return;
      var range = selection.getRangeAt(0);
      if (!box.contains(range.commonAncestorContainer) && range.commonAncestorContainer !== box) return;
      if (selection.isCollapsed) {
        var clicked = tokenAt(range.startContainer, range.startOffset, false);
        var at = words.indexOf(clicked);
        if (at >= 0) { caret = at; anchor = null; paint(); }
        return;
      }
      var first = tokenAt(range.startContainer, range.startOffset, false);
      var last = tokenAt(range.endContainer, range.endOffset, true);
      if (!first || !last) return;
      var i = tokens.indexOf(first);
      var j = tokens.indexOf(last);
      while (i <= j && tokens[i].classList.contains("tok-space")) i++;
      while (j >= i && tokens[j].classList.contains("tok-space")) j--;
      if (i > j) return;
      add(start(tokens[i]), end(tokens[j]));
      caret = Math.max(0, words.indexOf(tokens[j]));
      anchor = null;
      selection.removeAllRanges();
      paint();
      box.focus({ preventScroll: true });
    });

    render();
    if (!readonly) {
      paint();
      box.focus({ preventScroll: true });
    }
  }

  // --- word diff ----------------------------------------------------------------

  function wordTokens(text) {
    return text.match(/\s+|[^\s]+/g) || [];
  }

  function diff(a, b) {
    // Longest common subsequence over word tokens: small texts, so O(n·m) is fine.
    var x = wordTokens(a);
    var y = wordTokens(b);
    var n = x.length;
    var m = y.length;
    var table = [];
    for (var i = 0; i <= n; i++) {
      table.push(new Array(m + 1).fill(0));
    }
    for (i = n - 1; i >= 0; i--) {
      for (var j = m - 1; j >= 0; j--) {
        table[i][j] = x[i] === y[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
      }
    }
    var out = [];
    function push(op, text) {
      var last = out[out.length - 1];
      if (last && last[0] === op) last[1] += text; else out.push([op, text]);
    }
    i = 0;
    j = 0;
    while (i < n && j < m) {
      if (x[i] === y[j]) { push("=", x[i]); i++; j++; }
      else if (table[i + 1][j] >= table[i][j + 1]) { push("-", x[i]); i++; }
      else { push("+", y[j]); j++; }
    }
    while (i < n) { push("-", x[i++]); }
    while (j < m) { push("+", y[j++]); }
    return out;
  }

  function showDiff(target, a, b) {
    target.textContent = "";
    if (a === b) {
      var same = document.createElement("span");
      same.className = "muted";
      same.textContent = "No change.";
      target.appendChild(same);
      return;
    }
    diff(a, b).forEach(function (part) {
      var node = part[0] === "=" ? document.createTextNode(part[1])
        : document.createElement(part[0] === "-" ? "del" : "ins");
      if (part[0] !== "=") node.textContent = part[1];
      target.appendChild(node);
    });
  }

  function editBox(form) {
    var area = form.querySelector("#text");
    if (!area || area.disabled) return null;
    return area;
  }

  function focusEnd(area) {
    area.focus();
    var end = area.value.length;
    area.setSelectionRange(end, end);
  }

  // --- paraphrase review --------------------------------------------------------

  function EditForm(form) {
    var area = editBox(form);
    var output = form.querySelector("#diff");
    var original = document.getElementById(area ? area.dataset.originalFrom : "");
    if (!area || !original) return;
    var base = original.textContent;
    function update() { showDiff(output, base, area.value); }
    area.addEventListener("input", update);
    update();
    document.addEventListener("keydown", function (event) {
      if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
      if (typing(event.target)) {
        if (event.key === "Escape") { event.target.blur(); event.preventDefault(); }
        return;
      }
      if (event.key === "a" || event.key === "A") {
        var accept = form.querySelector("#accept");
        if (accept) { event.preventDefault(); accept.click(); }
      } else if (event.key === "e" || event.key === "E") {
        event.preventDefault();
        focusEnd(area);
      }
    });
  }

  // --- question choice ----------------------------------------------------------

  function ChoiceForm(form) {
    var area = editBox(form);
    var output = form.querySelector("#diff");
    var radios = toArray(form.querySelectorAll("input[type=radio][name=candidate]"));
    if (!area || !radios.length) return;
    function picked() {
      return radios.filter(function (r) { return r.checked; })[0] || null;
    }
    function update() {
      var radio = picked();
      var base = radio ? radio.dataset.text : "";
      showDiff(output, base, area.value.trim() ? area.value : base);
    }
    radios.forEach(function (radio) {
      radio.addEventListener("change", function () {
        area.value = radio.dataset.text;
        update();
      });
    });
    area.addEventListener("input", update);
    if (picked() && !area.value) area.value = picked().dataset.text;
    update();
    document.addEventListener("keydown", function (event) {
      if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
      if (typing(event.target)) {
        if (event.key === "Escape") { event.target.blur(); event.preventDefault(); }
        return;
      }
      var radio = radios.filter(function (r) { return r.dataset.key === event.key; })[0];
      if (radio) {
        event.preventDefault();
        radio.checked = true;
        radio.dispatchEvent(new Event("change", { bubbles: true }));
        radio.focus({ preventScroll: true });
      } else if (event.key === "e" || event.key === "E") {
        event.preventDefault();
        if (!picked()) return;
        focusEnd(area);
      }
    });
  }

  function init() {
    toArray(document.querySelectorAll("[data-span-widget]")).forEach(SpanWidget);
    toArray(document.querySelectorAll("[data-edit-form]")).forEach(EditForm);
    toArray(document.querySelectorAll("[data-choice-form]")).forEach(ChoiceForm);
    var form = document.getElementById("ct-form");
    if (!form) return;
    document.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        submitOnce(form);
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
