// What updates by itself, every interval: each element marked data-live is replaced by
// the same element of this page read again (so the server's templates stay the one place
// that renders anything; elements holding inputs a person types into are never marked),
// and on the queue list the charts (uPlot, shipped beside this file) from /api/history.
(function () {
  "use strict";
  var main = document.querySelector("main[data-interval]");
  if (!main) { return; }
  var interval = Math.max(1, parseFloat(main.dataset.interval) || 2) * 1000;
  var table = document.getElementById("queues");
  var charts = {};
  var colors = ["#2563eb", "#16a34a", "#dc2626"];

  function shown(u, v) {
    return v == null ? "–" : (Math.round(v * 10) / 10).toString();
  }

  // Away from the cursor the legend shows the latest values (uPlot's own shows "--").
  function latest(u) {
    var last = u.data[0].length - 1;
    var away = u.cursor.left == null || u.cursor.left < 0;
    if (away && last >= 0 && u.legend.idx !== last) { u.setLegend({ idx: last }, false); }
  }

  function chart(id, names, data) {
    var el = document.getElementById(id);
    var opts = {
      width: Math.max(300, el.clientWidth),
      height: 220,
      series: [{ value: "{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}" }].concat(names.map(function (n, i) {
        return { label: n, stroke: colors[i], width: 2, spanGaps: true, value: shown };
      })),
      axes: [{}, { size: 60 }],
      scales: { x: { time: true } },
      hooks: { setLegend: [latest] }
    };
    var u = new uPlot(opts, data, el);
    latest(u);
    return u;
  }

  function draw(h) {
    var sets = {
      "chart-throughput": [["pushed/s", "acked/s", "dead/s"], [h.t, h.pushed, h.acked, h.died]],
      "chart-backlog": [["waiting", "in flight", "dead"], [h.t, h.waiting, h.inflight, h.dead]]
    };
    Object.keys(sets).forEach(function (id) {
      if (charts[id]) { charts[id].setData(sets[id][1]); latest(charts[id]); }
      else { charts[id] = chart(id, sets[id][0], sets[id][1]); }
    });
  }

  function swapLive(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var fresh = doc.getElementById(el.id);
      if (fresh) { el.replaceWith(fresh); }
    });
    document.body.dataset.refreshed = String(Date.now());
  }

  function refresh() {
    if (table) {
      fetch(table.dataset.history, { credentials: "same-origin" })
        .then(function (r) { return r.json(); }).then(draw)
        .catch(function () {});
    }
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(swapLive)
      .catch(function () {});
  }

  if (table) { refresh(); }
  setInterval(refresh, interval);
  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (id) {
      var el = document.getElementById(id);
      charts[id].setSize({ width: Math.max(300, el.clientWidth), height: 220 });
    });
  });
})();
