// Draw every figure embedded in the page: <div data-figure="<id of a JSON script>">.
// A treemap with data-drill reloads the page on click (the URL is the tile's
// customdata) instead of plotly's own zoom, so drill-down is a real page with a
// breadcrumb and a shareable address.
(function () {
  "use strict";
  var config = { responsive: true, displayModeBar: false };
  document.querySelectorAll("[data-figure]").forEach(function (element) {
    var source = document.getElementById(element.dataset.figure);
    if (!source) { return; }
    var figure = JSON.parse(source.textContent);
    Plotly.newPlot(element, figure.data, figure.layout, config).then(function () {
      element.classList.add("plot-ready");
    });
    if (element.dataset.drill) {
      element.on("plotly_treemapclick", function (event) {
        var url = event.points[0] && event.points[0].customdata;
        if (url) { window.location.assign(url); }
        return false;  // never zoom in place: the page is the drill-down
      });
    }
  });
})();
