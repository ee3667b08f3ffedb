// The queue list's live parts: the charts (uPlot, shipped beside this file) from
// /api/history, and the table, pager and summary re-read from this same page every
// interval, so the server's template stays the one place that renders a row.
(function () {
  "use strict";
  var table = document.getElementById("queues");
  if (!table) { return; }
  var interval = Math.max(1, parseFloat(table.dataset.interval) || 2) * 1000;
  var charts = {};
  var colors = ["#2563eb", "#16a34a", "#dc2626"];

  function chart(id, names, data) {
    var el = document.getElementById(id);
    var opts = {
      width: Math.max(300, el.clientWidth),
      height: 220,
      series: [{}].concat(names.map(function (n, i) {
        return { label: n, stroke: colors[i], width: 2, spanGaps: true };
      })),
      axes: [{}, { size: 60 }],
      scales: { x: { time: true } }
    };
    return new uPlot(opts, data, el);
  }

  function draw(h) {
    var sets = {
      "chart-throughput": [["pushed/s", "acked/s", "dead/s"], [h.t, h.pushed, h.acked, h.died]],
      "chart-backlog": [["waiting", "in flight", "dead"], [h.t, h.waiting, h.inflight, h.dead]]
    };
    Object.keys(sets).forEach(function (id) {
      if (charts[id]) { charts[id].setData(sets[id][1]); }
      else { charts[id] = chart(id, sets[id][0], sets[id][1]); }
    });
  }

  function swap(doc, selector) {
    var fresh = doc.querySelector(selector), old = document.querySelector(selector);
    if (fresh && old) { old.replaceWith(fresh); }
  }

  function refresh() {
    fetch(table.dataset.history, { credentials: "same-origin" })
      .then(function (r) { return r.json(); }).then(draw)
      .catch(function () {});
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        ["#queues tbody", "#queues tfoot", "#summary", "#status", "#pager"].forEach(function (s) {
          swap(doc, s);
        });
        document.body.dataset.refreshed = String(Date.now());
      })
      .catch(function () {});
  }

  refresh();
  setInterval(refresh, interval);
  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (id) {
      var el = document.getElementById(id);
      charts[id].setSize({ width: Math.max(300, el.clientWidth), height: 220 });
    });
  });
})();
