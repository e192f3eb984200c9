// framejudge review: keyboard shortcuts and enlarged frames. Every action is a plain link or form
// button; this only presses them for the keyboard (the page works without it).
(function () {
  "use strict";
  var enlarged = document.getElementById("enlarged");

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

  function typing(el) {
    return el && (el.tagName === "TEXTAREA" || el.tagName === "SELECT" ||
                  (el.tagName === "INPUT" && el.type !== "checkbox" && el.type !== "radio"));
  }

  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.metaKey) return;
    var active = document.activeElement;
    if (e.key === "Escape") {
      if (enlarged && !enlarged.hidden) { enlarged.hidden = true; return; }
      if (active && active.blur) active.blur();
      return;
    }
    if (e.key === "Enter" && e.ctrlKey) {
      var submit = document.getElementById("submit");
      if (submit) { e.preventDefault(); submit.click(); }
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
    if (target.tagName === "A") { window.location.href = target.href; }
    else if (target.tagName === "SELECT" || target.tagName === "TEXTAREA") { target.focus(); }
    else { target.click(); }
  });
})();
