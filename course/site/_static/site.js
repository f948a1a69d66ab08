/* A displayed equation wider than its column is set smaller until it fits (down to 75% of
 * MathJax's size; MathJax 3 does not break lines), so that no display scrolls sideways.
 * Runs once MathJax has typeset the page (its startup promise resolves after it) and again
 * when the window is resized. Loaded after the MathJax configuration, before MathJax itself.
 */
(function () {
  "use strict";
  const FLOOR = 0.75;

  function fitDisplays() {
    document.querySelectorAll('mjx-container[display="true"]').forEach((box) => {
      const math = box.querySelector("mjx-math");
      if (!math) return;
      math.style.fontSize = "";
      const wide = math.getBoundingClientRect().width;
      const room = box.clientWidth;
      if (wide > room && room > 0) {
        math.style.fontSize = Math.max(FLOOR, (room - 2) / wide) * 100 + "%";
      }
    });
  }

  window.MathJax = window.MathJax || {};
  const startup = (window.MathJax.startup = window.MathJax.startup || {});
  startup.pageReady = () => window.MathJax.startup.defaultPageReady().then(fitDisplays);
  window.addEventListener("resize", fitDisplays);
})();
