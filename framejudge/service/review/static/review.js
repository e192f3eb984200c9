// framejudge review: keyboard shortcuts and enlarged frames. Every action is a plain link or form
// control; this only presses them for the keyboard (the page works without it).
//
// A decision is deliberate: j, 1-9 and h only choose (and show the chosen labels in the fields),
// Enter submits, and only once a decision is chosen. Once the page is left (a submit, a link),
// every further key is ignored here, so nothing typed meanwhile acts on this unit or the next.
(function () {
  "use strict";
  var enlarged = document.getElementById("enlarged");
  var form = document.getElementById("decision");
  var submit = document.getElementById("submit");
  var hint = document.getElementById("submit-hint");
  var leaving = false;

  function show(img) {
    if (!enlarged) return;
    enlarged.querySelector("img").src = img.src;
    enlarged.querySelector("p").textContent = img.dataset.time + " s";
    enlarged.hidden = false;
  }
  document.querySelectorAll("img.thumb").forEach(function (img) {
    img.addEventListener("click", function () { show(img); });
    img.addEventListener("keydown", function (e) { if (e.key === "Enter") { e.preventDefault(); show(img); } });
  });
  if (enlarged) enlarged.addEventListener("click", function () { enlarged.hidden = true; });

  function chosen() {
    return form ? form.querySelector("input[name=action]:checked") : null;
  }
  function ready() {  // the submit button works once a decision is chosen
    if (!submit) return;
    submit.disabled = !chosen();
    if (hint) hint.hidden = !!chosen();
  }
  if (form) {
    form.querySelectorAll("input[name=action]").forEach(function (radio) {
      radio.addEventListener("change", function () {
        if (radio.dataset.labels) {  // an adopted choice: its labels, shown in the fields
          var labels = JSON.parse(radio.dataset.labels);
          form.querySelectorAll("#manual select").forEach(function (select) {
            select.value = labels[select.name] || "";
          });
        }
        ready();
      });
    });
    form.querySelectorAll("#manual select").forEach(function (select) {
      select.addEventListener("change", function () {  // a label changed by hand: the decision is by hand
        var hand = document.getElementById("by-hand");
        if (hand && !hand.checked) { hand.checked = true; }
        ready();
      });
    });
    form.addEventListener("submit", function (e) {
      if (leaving) { e.preventDefault(); return; }  // one submit per page
      leaving = true;
    });
    ready();
  }
  window.addEventListener("pageshow", function (e) {  // back to this page from the browser's cache
    if (e.persisted) { leaving = false; ready(); }
  });

  function typing(el) {
    return el && (el.tagName === "TEXTAREA" || el.tagName === "SELECT" ||
                  (el.tagName === "INPUT" && el.type !== "checkbox" && el.type !== "radio"));
  }

  function submitChosen() {
    if (!submit || !chosen()) {  // nothing chosen: Enter does nothing but say so
      if (hint) { hint.hidden = false; hint.classList.add("error"); }
      return;
    }
    submit.click();
  }

  document.addEventListener("keydown", function (e) {
    if (leaving) { e.preventDefault(); return; }
    if (e.altKey || e.metaKey) return;
    var active = document.activeElement;
    if (e.key === "Escape") {
      if (enlarged && !enlarged.hidden) { enlarged.hidden = true; return; }
      if (active && active.blur) active.blur();
      return;
    }
    if (e.key === "Enter" && e.ctrlKey) {
      if (submit) { e.preventDefault(); submitChosen(); }
      return;
    }
    if (e.ctrlKey || typing(active)) return;
    if (e.key === "Enter" && active && active.tagName === "BUTTON") return;
    if (e.key === "Enter" && active && active.classList.contains("thumb")) return;
    var key = e.key === "Enter" ? "Enter" : e.key.toLowerCase();
    var target = null;
    document.querySelectorAll("[data-key]").forEach(function (el) {
      if (!target && el.dataset.key === key) target = el;
    });
    if (!target) return;
    e.preventDefault();
    if (target === submit) { submitChosen(); }
    else if (target.tagName === "A") { leaving = true; window.location.href = target.href; }
    else if (target.tagName === "SELECT" || target.tagName === "TEXTAREA") { target.focus(); }
    else if (target.id === "by-hand") {
      target.click();
      var first = form && form.querySelector("#manual select");
      if (first) first.focus();
    }
    else { target.click(); }
  });
})();
