/* memline's HTML report: our own script, no library, nothing fetched.
 * It reads the JSON in #memline-data (written by report/view_html.c) and
 * draws the overview (totals, memory over time per kind, regions), the
 * flame graph (canvas), the functions table and the source heat view. */
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('memline-data').textContent);
  var P = null;         /* the profile shown */
  var FL = null;        /* flame graph state */
  var KIND_COLORS = { heap: '#e8743b', cuda: '#76b041', cuda_gpu: '#4f9a2a', cuda_device: '#8fc15a',
    cuda_managed: '#5aa469', cuda_pinned: '#b07cc6', cuda_pool: '#3d9b8f', cuda_vmm: '#6a8fd1',
    cuda_array: '#a7a14a', cuda_mapped: '#9aa5b1', cuda_reserved: '#c3c9d1' };
  var OTHER_COLORS = ['#d9a13b', '#5b8def', '#c05fa6', '#3aa6a6', '#8b6fd6'];
  var $ = function (id) { return document.getElementById(id); };

  /* ---- formatting ---- */
  function fmtInt(n) { return Math.round(n).toLocaleString('en-US'); }
  function fmtBytes(b) {
    var neg = b < 0, v = Math.abs(b), u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    if (v < 1024) return (neg ? '-' : '') + v + ' B';
    while (v >= 1023.995 && i < u.length - 1) { v /= 1024; i++; }
    return (neg ? '-' : '') + v.toFixed(2) + ' ' + u[i];
  }
  function fmtSec(ns) {
    var s = ns / 1e9;
    if (Math.abs(s) >= 1) return s.toFixed(3) + ' s';
    if (Math.abs(s) >= 1e-3) return (s * 1e3).toFixed(2) + ' ms';
    return (s * 1e6).toFixed(1) + ' us';
  }
  function signed(s, v) { return (P.base && v > 0 ? '+' : '') + s; }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c];
    });
  }
  function baseName(p) { return p ? p.slice(p.lastIndexOf('/') + 1) : ''; }
  function el(tag, attrs, html) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (html !== undefined) e.innerHTML = html;
    return e;
  }
  function kindColor(name, i) { return KIND_COLORS[name] || OTHER_COLORS[i % OTHER_COLORS.length]; }
  function svgEl(tag, attrs) {
    var e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  var tip = $('tip');
  function showTip(html, ev) {
    tip.innerHTML = html;
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14, r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 8) x = ev.clientX - r.width - 14;
    if (y + r.height > window.innerHeight - 8) y = ev.clientY - r.height - 14;
    tip.style.left = Math.max(4, x) + 'px';
    tip.style.top = Math.max(4, y) + 'px';
  }
  function hideTip() { tip.hidden = true; }

  /* ---- the measures of a group: field offsets in the flame rows ---- */
  var FIELDS = { alloc: 0, allocs: 1, peak: 2, peak_blocks: 3, leaked: 4, leaked_blocks: 5 };
  var MEASURES = [
    { key: 'alloc', title: 'Allocated', count: 'allocs', countName: 'allocations' },
    { key: 'peak', title: 'Live at peak', count: 'peak_blocks', countName: 'blocks' },
    { key: 'leaked', title: 'Leaked (live at exit)', count: 'leaked_blocks', countName: 'blocks' }
  ];
  function valueIndex(group, field) { return group * 6 + FIELDS[field]; }
  function timeIndex() { return P.groups.length * 6; }

  /* ---- overview: totals and memory over time ---- */
  function summary() {
    var s = $('summary');
    s.innerHTML = '';
    var argv = (P.argv.length ? P.argv : [P.exe]).join(' ');
    s.appendChild(el('p', { class: 'meta' }, esc(argv) + ' &nbsp;|&nbsp; pid ' + P.pid +
      ' &nbsp;|&nbsp; ran ' + fmtSec(P.duration_ns) + (P.base ? ' &nbsp;|&nbsp; difference against ' + esc(P.base) : '')));
    var cards = el('div', { class: 'cards', id: 'totals' });
    var kinds = Object.keys(P.totals);
    kinds.forEach(function (k, i) {
      var t = P.totals[k];
      var c = el('div', { class: 'card', 'data-kind': k });
      var rows = [['Peak', 'peak_bytes', t.peak_bytes, fmtBytes(t.peak_bytes) + ' <span class="muted">at ' + fmtSec(t.peak_time_ns) + '</span>'],
        ['Allocated', 'alloc_bytes', t.alloc_bytes, fmtBytes(t.alloc_bytes) + ' <span class="muted">in ' + fmtInt(t.allocs) + ' allocations</span>'],
        ['Leaked', 'leaked_bytes', t.leaked_bytes, fmtBytes(t.leaked_bytes) + ' <span class="muted">in ' + fmtInt(t.leaked_blocks) + ' blocks</span>']];
      var html = '<h3><span class="swatch" style="background:' + kindColor(k, i) + '"></span>' + esc(k) +
        (k === 'cuda_gpu' ? ' <span class="muted">(GPU kinds together)</span>' : '') + '</h3><table>';
      rows.forEach(function (r) {
        html += '<tr><td>' + r[0] + '</td><td class="num" data-field="' + r[1] + '" data-v="' + r[2] +
          '" title="' + fmtInt(r[2]) + ' bytes">' + r[3] + '</td></tr>';
      });
      c.innerHTML = html + '</table>';
      cards.appendChild(c);
    });
    if (P.samples) {
      var c = el('div', { class: 'card', 'data-kind': 'time' });
      c.innerHTML = '<h3>time <span class="muted">(estimated)</span></h3><table><tr><td>Samples</td><td class="num" data-field="samples" data-v="' +
        P.samples.samples + '">' + fmtInt(P.samples.samples) + '</td></tr><tr><td>Sampled time</td><td class="num">' +
        fmtSec(P.samples.samples * P.samples.period_ns) + '</td></tr><tr><td>Clock</td><td class="num">' + P.samples.clock + '</td></tr></table>';
      cards.appendChild(c);
    }
    s.appendChild(cards);
  }

  function niceTicks(max, n) {
    if (max <= 0) return [0];
    var step = Math.pow(10, Math.floor(Math.log10(max / n))), err = max / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    var t = [];
    for (var v = 0; v <= max * 1.0001; v += step) t.push(v);
    return t;
  }
  /* ticks in one binary unit: [value, label] */
  function byteTicks(max) {
    if (max <= 0) return [[0, '0 B']];
    var unit = 1, names = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (max / unit >= 1024 && i < names.length - 1) { unit *= 1024; i++; }
    return niceTicks(max / unit, 4).map(function (v) {
      return [v * unit, (+v.toPrecision(4)) + ' ' + names[i]];
    });
  }
  /* time ticks in s, ms or us: [ns, label] */
  function timeTicks(end) {
    var unit = 1e9, name = 's';
    if (end < 2e6) { unit = 1e3; name = 'us'; } else if (end < 2e9) { unit = 1e6; name = 'ms'; }
    return niceTicks(end / unit, 8).map(function (v) { return [v * unit, (+v.toPrecision(6)) + ' ' + name]; });
  }

  /* A memory-over-time series by what it holds: a Python program's CPU
   * curve is heap and Python objects together (one total in the runtime). */
  function seriesName(kind) {
    return kind + (kind === 'cuda_gpu' ? ' (GPU kinds together)' :
                   kind === 'cpu' ? ' (heap + Python objects)' : '');
  }

  function timeline() {
    var box = $('timeline');
    box.innerHTML = '';
    var W = Math.max(640, Math.min(box.clientWidth || 1100, 1800)), L = 110, R = 20;
    var end = P.duration_ns || 1;
    P.timeline.forEach(function (s) {
      if (s.t.length && s.t[s.t.length - 1] >= end) end = s.t[s.t.length - 1] + 1;
    });
    var x = function (t) { return L + (W - L - R) * t / end; };
    if (!P.timeline.length) box.appendChild(el('p', { class: 'muted' }, 'The profile has no timeline points.'));
    P.timeline.forEach(function (s, si) {
      var H = 170, T = 26, B = 24, color = kindColor(s.kind, si);
      var top = Math.max(s.peak_bytes, Math.max.apply(null, s.b.concat([1])));
      var y = function (b) { return T + (H - T - B) * (1 - b / top); };
      var chart = el('div', { class: 'chart', 'data-kind': s.kind });
      var svg = svgEl('svg', { width: W, height: H, 'data-peak': s.peak_bytes });
      var g = svgEl('g', { class: 'axis' });
      byteTicks(top).forEach(function (v) {
        g.appendChild(svgEl('line', { x1: L, x2: W - R, y1: y(v[0]), y2: y(v[0]), class: 'gridline' }));
        var t = svgEl('text', { x: L - 6, y: y(v[0]) + 4, 'text-anchor': 'end' });
        t.textContent = v[1];
        g.appendChild(t);
      });
      timeTicks(end).forEach(function (v) {
        var t = svgEl('text', { x: x(v[0]), y: H - 7, 'text-anchor': 'middle' });
        t.textContent = v[1];
        g.appendChild(t);
        g.appendChild(svgEl('line', { x1: x(v[0]), x2: x(v[0]), y1: H - B, y2: H - B + 4 }));
      });
      g.appendChild(svgEl('line', { x1: L, x2: W - R, y1: H - B, y2: H - B }));
      svg.appendChild(g);
      /* a step line: the level holds until the next point */
      var d = 'M' + x(0) + ',' + y(0), px = x(0);
      for (var i = 0; i < s.t.length; i++) {
        var xi = x(s.t[i]);
        d += 'L' + xi + ',' + y(i ? s.b[i - 1] : 0) + 'L' + xi + ',' + y(s.b[i]);
        px = xi;
      }
      var last = s.b.length ? s.b[s.b.length - 1] : 0;
      d += 'L' + x(end) + ',' + y(last);
      svg.appendChild(svgEl('path', { d: d + 'L' + x(end) + ',' + y(0) + 'Z', fill: color, 'fill-opacity': 0.22, stroke: 'none' }));
      svg.appendChild(svgEl('path', { d: d, fill: 'none', stroke: color, 'stroke-width': 1.6 }));
      var pxp = x(s.peak_time_ns), pyp = y(s.peak_bytes);
      svg.appendChild(svgEl('line', { x1: pxp, x2: pxp, y1: pyp, y2: H - B, stroke: '#c0392b', 'stroke-dasharray': '3,3' }));
      svg.appendChild(svgEl('circle', { cx: pxp, cy: pyp, r: 4.5, fill: '#c0392b', class: 'peak' }));
      var lab = svgEl('text', { x: pxp + (pxp > W * 0.7 ? -8 : 8), y: Math.max(pyp - 7, 12), 'text-anchor': pxp > W * 0.7 ? 'end' : 'start', fill: '#c0392b', 'font-size': 12, 'font-weight': 600 });
      lab.textContent = 'peak ' + fmtBytes(s.peak_bytes) + ' at ' + fmtSec(s.peak_time_ns);
      svg.appendChild(lab);
      var title = svgEl('text', { x: L, y: 16, class: 'label' });
      title.textContent = seriesName(s.kind) + ': live bytes';
      svg.appendChild(title);
      var cursor = svgEl('line', { y1: T, y2: H - B, stroke: '#555', 'stroke-width': 0.7, visibility: 'hidden' });
      svg.appendChild(cursor);
      svg.addEventListener('mousemove', function (ev) {
        var r = svg.getBoundingClientRect(), mx = ev.clientX - r.left;
        var t = (mx - L) / (W - L - R) * end;
        if (t < 0 || t > end) { hideTip(); cursor.setAttribute('visibility', 'hidden'); return; }
        var k = -1;
        for (var i = 0; i < s.t.length && s.t[i] <= t; i++) k = i;
        var v = k >= 0 ? s.b[k] : 0;
        cursor.setAttribute('x1', mx); cursor.setAttribute('x2', mx);
        cursor.setAttribute('visibility', 'visible');
        showTip('<b>' + esc(seriesName(s.kind)) + '</b> at ' + fmtSec(t) + '<br>' + fmtBytes(v) + ' (' + fmtInt(v) +
          ' bytes) live<br><span class="muted">each point is the highest level of its stretch of time</span>', ev);
      });
      svg.addEventListener('mouseleave', function () { hideTip(); cursor.setAttribute('visibility', 'hidden'); });
      chart.appendChild(svg);
      box.appendChild(chart);
    });
    regions(box, W, L, R, end, x);
  }

  /* one lane per region path, its spans as bars on the time axis */
  function regions(box, W, L, R, end, x) {
    if (!P.spans.length) return;
    var first = {};
    P.spans.forEach(function (s) { if (!(s[0] in first) || s[2] < first[s[0]]) first[s[0]] = s[2]; });
    /* lanes in the order regions first opened, outer before inner */
    var lanes = Object.keys(first).sort(function (a, b) { return first[a] - first[b] || a.length - b.length; });
    var laneOf = {};
    lanes = lanes.slice(0, 30);
    lanes.forEach(function (n, i) { laneOf[n] = i; });
    var RH = 18, H = lanes.length * RH + 30;
    var chart = el('div', { class: 'chart', id: 'regions' });
    var svg = svgEl('svg', { width: W, height: H });
    var title = svgEl('text', { x: L, y: 16, class: 'label' });
    title.textContent = 'Regions (memline.h, NVTX)' + (P.spans_dropped ? ': the first ' + P.spans.length + ' spans; ' + P.spans_dropped + ' later ones not drawn' : '');
    svg.appendChild(title);
    lanes.forEach(function (name, i) {
      var t = svgEl('text', { x: L - 6, y: 26 + i * RH + 12, 'text-anchor': 'end', 'font-size': 11, fill: '#444' });
      var label = name.split('/').join(' \u203a ');
      t.textContent = label.length > 14 ? '\u2026' + label.slice(-13) : label;
      svg.appendChild(t);
    });
    P.spans.forEach(function (s) {
      var lane = laneOf[s[0]];
      if (lane === undefined || lane >= 30) return;
      var x0 = x(s[2]), w = Math.max(1, x(s[3]) - x0);
      var r = svgEl('rect', { x: x0, y: 26 + lane * RH + 2, width: w, height: RH - 5, rx: 2,
        fill: s[4] ? '#76b041' : '#5b8def', 'fill-opacity': 0.8 });
      r.addEventListener('mousemove', function (ev) {
        showTip('<b>' + esc(s[0]) + '</b>' + (s[4] ? ' (NVTX)' : '') + '<br>' + fmtSec(s[2]) + ' to ' + fmtSec(s[3]) +
          ' (' + fmtSec(s[3] - s[2]) + ')<br>thread ' + s[1], ev);
      });
      r.addEventListener('mouseleave', hideTip);
      svg.appendChild(r);
    });
    chart.appendChild(svg);
    box.appendChild(chart);
  }

  /* ---- the flame graph ---- */
  function flameSetup() {
    var f = P.flame, n = f.parent.length;
    var kids = new Array(n), depth = new Int32Array(n);
    for (var i = 0; i < n; i++) kids[i] = [];
    for (i = 1; i < n; i++) { kids[f.parent[i]].push(i); depth[i] = depth[f.parent[i]] + 1; }
    FL = { kids: kids, depth: depth, zoom: 0, vi: 0, search: null, rects: [] };
    var gsel = $('fl-group');
    gsel.innerHTML = '';
    P.groups.forEach(function (g, i) { gsel.appendChild(el('option', { value: i }, esc(g))); });
    if (P.has_time) gsel.appendChild(el('option', { value: 'time' }, 'time (line timer)'));
    flameMeasures();
  }
  function flameMeasures() {
    var msel = $('fl-measure'), time = $('fl-group').value === 'time';
    msel.innerHTML = '';
    if (time) msel.appendChild(el('option', { value: 'time' }, 'Time (samples)'));
    else MEASURES.forEach(function (m) { msel.appendChild(el('option', { value: m.key }, m.title)); });
    flameValue();
  }
  function flameValue() {
    var g = $('fl-group').value, m = $('fl-measure').value;
    FL.time = g === 'time';
    FL.vi = FL.time ? timeIndex() : valueIndex(+g, m);
    var meas = MEASURES.filter(function (x) { return x.key === m; })[0];
    FL.ci = FL.time ? -1 : valueIndex(+g, meas.count);
    FL.countName = meas ? meas.countName : '';
    var vi = FL.vi, kids = FL.kids;
    var T = P.flame.total[vi], B = P.flame.base ? P.flame.base[vi] : null;
    /* the width of a node: its value, or in a difference the new run's */
    FL.width = function (i) { var v = B ? T[i] + B[i] : T[i]; return Math.abs(v); };
    kids.forEach(function (k) { k.sort(function (a, b) { return FL.width(b) - FL.width(a); }); });
    FL.zoom = 0;
    flameDraw();
  }
  function fmtValue(v) {
    if (FL.time) return fmtSec(v * P.period_ns) + ' (' + fmtInt(v) + ' samples)';
    return fmtBytes(v) + ' (' + fmtInt(v) + ' bytes)';
  }
  function nodeName(i) { return i ? P.names[P.flame.fn[i]] : 'all'; }
  function nodeWhere(i) {
    var f = P.names[P.flame.file[i]], m = P.names[P.flame.module[i]];
    return f ? f + ':' + P.flame.line[i] : m ? 'in ' + m : '';
  }
  /* warm colours, stable per function name (hue 8-44, a little lightness play) */
  function hashColor(s) {
    var h = 0;
    for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
    h = h >>> 0;
    return 'hsl(' + (8 + h % 37) + ',' + (62 + (h >> 8) % 18) + '%,' + (60 + (h >> 16) % 12) + '%)';
  }
  function diffColor(d, scale) {
    var a = Math.min(1, Math.abs(d) / (scale || 1)), c = 235 - Math.round(150 * a);
    return d > 0 ? 'rgb(245,' + c + ',' + c + ')' : d < 0 ? 'rgb(' + c + ',' + c + ',245)' : 'rgb(225,225,225)';
  }
  function flameDraw() {
    var cv = $('fl-canvas'), wrap = $('fl-wrap');
    var W = Math.max(600, wrap.clientWidth || 1100), RH = 18, f = P.flame, vi = FL.vi;
    var T = f.total[vi], rects = [], maxDepth = 0, z = FL.zoom;
    var zw = FL.width(z) || 1, zd = FL.depth[z];
    var ancestors = [];
    for (var a = z; a; a = f.parent[a]) ancestors.unshift(a);
    if (z) ancestors.unshift(0);
    ancestors.pop();
    /* the ancestors of the zoomed node, full width on top */
    ancestors.forEach(function (n, k) { rects.push([n, 0, W, k, true]); });
    var off = ancestors.length;
    function lay(n, x0, d) {
      var w = FL.width(n) / zw * W;
      if (w < 0.35) return;
      rects.push([n, x0, w, d + off, false]);
      if (d + off > maxDepth) maxDepth = d + off;
      var x = x0;
      FL.kids[n].forEach(function (c) { lay(c, x, d + 1); x += FL.width(c) / zw * W; });
    }
    lay(z, 0, 0);
    var H = (maxDepth + 1) * RH + 4, dpr = window.devicePixelRatio || 1;
    cv.width = W * dpr; cv.height = H * dpr;
    cv.style.width = W + 'px'; cv.style.height = H + 'px';
    var ctx = cv.getContext('2d');
    ctx.scale(dpr, dpr);
    ctx.font = '12px "DejaVu Sans", Arial, sans-serif';
    ctx.textBaseline = 'middle';
    var scale = 0;
    if (f.base) rects.forEach(function (r) { scale = Math.max(scale, Math.abs(T[r[0]])); });
    var matched = 0, re = FL.search;
    var matchedTop = {};
    rects.forEach(function (r) {
      var n = r[0], x = r[1], w = r[2], y = r[3] * RH;
      var name = nodeName(n), hit = re && n && (re.test(name) || re.test(nodeWhere(n)));
      if (hit) {
        var up = f.parent[n], inside = false;
        for (; up; up = f.parent[up]) if (matchedTop[up]) { inside = true; break; }
        if (!inside && !r[4]) { matchedTop[n] = 1; matched += Math.abs(T[n]); }
      }
      ctx.fillStyle = r[4] ? '#d7dbe3' : hit ? '#d65fc8' : f.base ? diffColor(T[n], scale) :
        f.merged[n] ? '#cfd3db' : n ? hashColor(name) : '#c8ccd4';
      ctx.fillRect(x + 0.5, y + 1, Math.max(0.5, w - 1), RH - 2);
      if (w > 28) {
        ctx.fillStyle = '#1d2330';
        var label = n ? name + (P.flame.line[n] ? ' :' + P.flame.line[n] : '') : 'all: ' + fmtValue(T[0]);
        var room = Math.floor((w - 8) / 6.6);
        if (label.length > room) label = room > 2 ? label.slice(0, room - 1) + '\u2026' : '';
        ctx.fillText(label, x + 4, y + RH / 2);
      }
    });
    FL.rects = rects;
    FL.RH = RH;
    /* the line above the graph: what is drawn, its total, what was pruned */
    var pr = f.pruned[vi], root = T[0];
    var info = '<b>' + esc(FL.time ? 'Time' : P.groups[+$('fl-group').value] + ', ' + $('fl-measure').selectedOptions[0].text.toLowerCase()) + '</b>: ' +
      signed(fmtValue(root), root) + (f.base ? ' against the base\'s ' + fmtValue(f.base[vi][0]) : '');
    info += ' &nbsp;<span class="muted">' + fmtInt(f.nodes) + ' of ' + fmtInt(f.all_nodes) + ' call sites shown';
    if (f.pruned_nodes) info += '; ' + fmtInt(f.pruned_nodes) + ' smaller ' + (f.pruned_nodes === 1 ? 'one' : 'ones') +
      ' (each below ' + (f.fraction * 100) + '% of the total) merged into grey \u201c[smaller calls]\u201d frames, holding ' + signed(fmtValue(pr), pr);
    info += '</span>';
    var fi = $('fl-info');
    fi.innerHTML = info;
    fi.setAttribute('data-total', root);
    fi.setAttribute('data-pruned', pr);
    fi.setAttribute('data-frames', rects.length);
    $('fl-match').textContent = re ? 'matched: ' + fmtValue(matched) + (root ? ' (' + (100 * matched / Math.abs(root)).toFixed(1) + '%)' : '') : '';
    var crumbs = $('fl-crumbs');
    crumbs.innerHTML = '';
    if (z) {
      var a0 = el('a', {}, 'all');
      a0.onclick = function () { FL.zoom = 0; flameDraw(); };
      crumbs.appendChild(a0);
      crumbs.appendChild(document.createTextNode(' \u203a ' + nodeName(z)));
    }
  }
  function flameHit(ev) {
    var cv = $('fl-canvas'), r = cv.getBoundingClientRect();
    var mx = ev.clientX - r.left, my = ev.clientY - r.top, row = Math.floor(my / FL.RH);
    for (var i = FL.rects.length - 1; i >= 0; i--) {
      var q = FL.rects[i];
      if (q[3] === row && mx >= q[1] && mx < q[1] + q[2]) return q[0];
    }
    return -1;
  }
  function flameTip(ev) {
    var n = flameHit(ev);
    if (n < 0) { hideTip(); return; }
    var f = P.flame, vi = FL.vi, T = f.total[vi], S = f.self[vi], v = T[n];
    var kidsSum = 0;
    FL.kids[n].forEach(function (c) { kidsSum += T[c]; });
    var pruned = v - S[n] - kidsSum;
    var html = '<b>' + esc(nodeName(n)) + '</b><br><span class="where">' + esc(f.merged[n] ?
      'the calls of ' + nodeName(f.parent[n]) + ' below ' + (f.fraction * 100) + '% of the total, merged' : nodeWhere(n)) + '</span><br>';
    html += signed(fmtValue(v), v);
    if (FL.ci >= 0) html += ' in ' + fmtInt(f.total[FL.ci][n]) + ' ' + FL.countName;
    if (T[0]) html += ', ' + (100 * v / T[0]).toFixed(2) + '% of all';
    if (f.base) html += '<br>base ' + fmtValue(f.base[vi][n]) + ', new ' + fmtValue(f.base[vi][n] + v);
    html += '<br>self (here, not in callees): ' + fmtValue(S[n]);
    if (pruned) html += '<br>in pruned callees: ' + fmtValue(pruned);
    showTip(html, ev);
  }
  function flameClick(ev) {
    var n = flameHit(ev);
    if (n < 0) return;
    if (ev.shiftKey) { openSource(P.names[P.flame.file[n]], P.flame.line[n]); return; }
    if (P.flame.merged[n]) return;
    FL.zoom = n;
    flameDraw();
  }

  /* ---- the functions table ---- */
  var OPS_COLS = [['Self Alloc', 0, 'b'], ['Total Alloc', 1, 'b'], ['Self Allocs', 2, 'n'], ['Total Allocs', 3, 'n'],
    ['Peak', 4, 'b'], ['Self Peak', 5, 'b'], ['Leaked', 6, 'b']];
  var OPS = { sort: 1, asc: false, filter: null };
  function opsColumns() {
    var g = +$('op-group').value, cols = [];
    OPS_COLS.forEach(function (c) { cols.push([c[0], 2 + g * 7 + c[1], c[2]]); });
    if (P.has_time) {
      cols.unshift(['Total Time', 2 + P.groups.length * 7 + 1, 't']);
      cols.unshift(['Self Time', 2 + P.groups.length * 7, 't']);
    }
    return cols;
  }
  function cell(v, kind) {
    var cls = P.base ? (v > 0 ? 'pos' : v < 0 ? 'neg' : '') : '';
    var text = !v ? '' : kind === 'b' ? signed(fmtBytes(v), v) : kind === 't' ? signed(fmtSec(v * P.period_ns), v) : signed(fmtInt(v), v);
    var title = kind === 'b' ? fmtInt(v) + ' bytes' : kind === 't' ? fmtInt(v) + ' samples' : fmtInt(v);
    return '<td class="' + cls + '" data-v="' + v + '" title="' + title + '">' + text + '</td>';
  }
  function opsDraw() {
    var cols = opsColumns(), rows = P.ops.rows.slice();
    if (OPS.filter) rows = rows.filter(function (r) { return OPS.filter.test(r[0]) || OPS.filter.test(r[1] || ''); });
    var key = OPS.sort;
    rows.sort(function (a, b) {
      var x = key === 0 ? a[0] : a[key], y = key === 0 ? b[0] : b[key];
      if (key !== 0 && P.base) { x = Math.abs(x); y = Math.abs(y); }
      var c = x < y ? -1 : x > y ? 1 : 0;
      return OPS.asc ? c : -c;
    });
    var shown = rows.slice(0, 800);
    var html = '<thead><tr><th class="txt' + (key === 0 ? ' sorted' + (OPS.asc ? ' asc' : '') : '') + '" data-k="0">Function</th><th class="txt" data-k="-1">File</th>';
    cols.forEach(function (c) {
      html += '<th data-k="' + c[1] + '" class="' + (key === c[1] ? 'sorted' + (OPS.asc ? ' asc' : '') : '') + '">' + c[0] + '</th>';
    });
    html += '</tr></thead><tbody>';
    shown.forEach(function (r) {
      html += '<tr data-name="' + esc(r[0]) + '" data-file="' + esc(r[1] || '') + '"><td class="txt fn" title="' + esc(r[0]) + '">' + esc(r[0]) +
        '</td><td class="txt muted">' + esc(baseName(r[1])) + '</td>';
      cols.forEach(function (c) { html += cell(r[c[1]], c[2]); });
      html += '</tr>';
    });
    $('op-table').innerHTML = html + '</tbody>';
    $('op-count').textContent = rows.length + ' of ' + P.ops.functions + ' functions' +
      (shown.length < rows.length ? ', the first ' + shown.length + ' shown' : '') +
      (P.ops.rows.length < P.ops.functions ? ' (the report holds the ' + P.ops.rows.length + ' largest)' : '') +
      '; click a header to sort, a row to see its source';
  }

  /* ---- the source view ---- */
  var LINE_COLS = [['Self Alloc', 0, 'b'], ['Total Alloc', 1, 'b'], ['Allocs', 2, 'n'], ['Peak', 3, 'b'], ['Leaked', 4, 'b']];
  function sourceSetup() {
    var fsel = $('src-file');
    fsel.innerHTML = '';
    P.sources.files.forEach(function (f, i) {
      fsel.appendChild(el('option', { value: i }, esc(baseName(f.file)) + ' \u2014 ' + esc(f.file)));
    });
    $('src-note').textContent = P.sources.files.length ? '' : 'No source file of the profile could be read here (' +
      P.sources.files_with_lines + ' files have lines with memory or time).';
    var hsel = $('src-heat');
    hsel.innerHTML = '';
    LINE_COLS.forEach(function (c) { if (c[2] === 'b') hsel.appendChild(el('option', { value: c[1] }, c[0])); });
    if (P.has_time) {
      hsel.appendChild(el('option', { value: 't1' }, 'Time'));
      hsel.appendChild(el('option', { value: 't0' }, 'Self Time'));
    }
    hsel.value = 1;
  }
  function openSource(file, line) {
    var files = P.sources.files, idx = -1;
    for (var i = 0; i < files.length; i++)
      if (files[i].file === file || baseName(files[i].file) === baseName(file)) { idx = i; break; }
    if (idx < 0) { alert('The source of ' + (file || 'this frame') + ' is not in the report.'); return; }
    $('src-file').value = idx;
    location.hash = '#source';
    sourceDraw(line);
  }
  function sourceDraw(focusLine) {
    var f = P.sources.files[+$('src-file').value], tb = $('src-table');
    if (!f) { tb.innerHTML = ''; return; }
    var g = +$('src-group').value, w = P.sources.width, hv = $('src-heat').value;
    var ng = P.groups.length;
    var cols = LINE_COLS.map(function (c) { return [c[0], g * 5 + c[1], c[2]]; });
    if (P.has_time) { cols.unshift(['Time', ng * 5 + 1, 't']); cols.unshift(['Self Time', ng * 5, 't']); }
    var hi = hv[0] === 't' ? ng * 5 + (+hv[1]) : g * 5 + (+hv);
    var max = 0, hot = [];
    for (var ln in f.heat) { max = Math.max(max, Math.abs(f.heat[ln][hi])); if (f.heat[ln][hi]) hot.push(+ln); }
    var show = new Uint8Array(f.text.length + 2), CONTEXT = 12;
    if (f.text.length <= 1500) show.fill(1);
    else Object.keys(f.heat).forEach(function (ln) {
      for (var k = Math.max(1, +ln - CONTEXT); k <= Math.min(f.text.length, +ln + CONTEXT); k++) show[k] = 1;
    });
    var html = '<thead><tr><th>Line</th>';
    cols.forEach(function (c) { html += '<th>' + c[0] + '</th>'; });
    html += '<th class="txt">' + esc(f.file) + '</th></tr></thead><tbody>';
    var gap = false;
    for (var i = 1; i <= f.text.length; i++) {
      if (!show[i]) { if (!gap) html += '<tr class="gap"><td colspan="' + (cols.length + 2) + '">\u22ee</td></tr>'; gap = true; continue; }
      gap = false;
      var row = f.heat[i], v = row ? row[hi] : 0, a = max ? Math.abs(v) / max : 0;
      var bg = a ? (v < 0 ? 'rgba(46,134,222,' : 'rgba(232,116,59,') + (0.12 + 0.6 * a).toFixed(3) + ')' : 'transparent';
      html += '<tr id="L' + i + '" data-line="' + i + '"><td class="ln">' + i + '</td>';
      cols.forEach(function (c) { html += row ? cell(row[c[1]], c[2]) : '<td></td>'; });
      html += '<td class="code" style="background:' + bg + '">' + esc(f.text[i - 1]) + '</td></tr>';
    }
    tb.innerHTML = html + '</tbody>';
    var target = focusLine || (hot.length ? hot.reduce(function (a, b) {
      return Math.abs(f.heat[b][hi]) > Math.abs(f.heat[a][hi]) ? b : a;
    }) : 0);
    var row2 = target && document.getElementById('L' + target);
    if (row2) {
      row2.scrollIntoView({ block: 'center' });
      if (focusLine) row2.style.outline = '2px solid #2f6fde';
    }
  }

  /* ---- tabs, the process selector, start ---- */
  /* #flame:GROUP:MEASURE picks what the flame graph shows (a link or a test) */
  function flameFromHash(parts) {
    var g = parts[1], m = parts[2], gs = $('fl-group');
    if (!g) return;
    var want = g === 'time' ? 'time' : String(P.groups.indexOf(g));
    if (want === '-1' || gs.value === want && (!m || $('fl-measure').value === m)) return;
    gs.value = want;
    flameMeasures();
    if (m && g !== 'time') { $('fl-measure').value = m; flameValue(); }
  }
  function showTab() {
    var parts = (location.hash || '#overview').slice(1).split(':'), name = parts[0];
    if (name === 'flame' && $('fl-group').options.length) flameFromHash(parts);
    if (!$(name) || !$(name).classList.contains('tab')) name = 'overview';
    document.querySelectorAll('.tab').forEach(function (t) { t.classList.toggle('on', t.id === name); });
    document.querySelectorAll('#tabs a').forEach(function (a) { a.classList.toggle('on', a.getAttribute('data-tab') === name); });
    if (name === 'overview') timeline();
    if (name === 'flame') flameDraw();
    if (name === 'source') sourceDraw();
  }
  function groupSelect(id) {
    var s = $(id);
    s.innerHTML = '';
    P.groups.forEach(function (g, i) { s.appendChild(el('option', { value: i }, esc(g))); });
  }
  function show(i) {
    P = D.profiles[i];
    var argv0 = P.argv.length ? P.argv[0] : P.exe;
    $('title').textContent = baseName(argv0) + ' (pid ' + P.pid + ')' + (P.base ? ': difference against ' + P.base : '');
    document.body.setAttribute('data-pid', P.pid);
    summary();
    flameSetup();
    groupSelect('op-group');
    OPS.sort = 3;  /* Total Alloc of the first group */
    OPS.asc = false;
    opsDraw();
    groupSelect('src-group');
    sourceSetup();
    showTab();
  }
  function start() {
    if (!D.profiles.length) { document.body.innerHTML = '<p>No profile.</p>'; return; }
    var ps = $('process');
    if (D.profiles.length > 1) {
      ps.hidden = false;
      D.profiles.forEach(function (p, i) {
        ps.appendChild(el('option', { value: i }, esc(baseName(p.argv.length ? p.argv[0] : p.exe)) + ' (pid ' + p.pid + ')'));
      });
      ps.onchange = function () { show(+ps.value); };
    }
    $('fl-group').onchange = flameMeasures;
    $('fl-measure').onchange = flameValue;
    $('fl-reset').onclick = function () { FL.zoom = 0; flameDraw(); };
    $('fl-search').oninput = function () {
      var q = this.value;
      try { FL.search = q ? new RegExp(q, 'i') : null; } catch (e) { FL.search = null; }
      flameDraw();
    };
    var cv = $('fl-canvas');
    cv.addEventListener('mousemove', flameTip);
    cv.addEventListener('mouseleave', hideTip);
    cv.addEventListener('click', flameClick);
    $('op-group').onchange = function () { OPS.sort = 3 + 7 * +this.value; OPS.asc = false; opsDraw(); };
    $('op-filter').oninput = function () {
      try { OPS.filter = this.value ? new RegExp(this.value, 'i') : null; } catch (e) { OPS.filter = null; }
      opsDraw();
    };
    $('op-table').addEventListener('click', function (ev) {
      var th = ev.target.closest('th'), tr = ev.target.closest('tbody tr');
      if (th) {
        var k = +th.getAttribute('data-k');
        if (k < 0) return;
        if (OPS.sort === k) OPS.asc = !OPS.asc; else { OPS.sort = k; OPS.asc = k === 0; }
        opsDraw();
      } else if (tr && tr.getAttribute('data-file')) {
        openSource(tr.getAttribute('data-file'), 0);
      }
    });
    $('src-file').onchange = function () { sourceDraw(); };
    $('src-group').onchange = function () { sourceDraw(); };
    $('src-heat').onchange = function () { sourceDraw(); };
    window.addEventListener('hashchange', showTab);
    document.addEventListener('keydown', function (ev) {
      if (ev.key === 'Escape' && FL && FL.zoom) { FL.zoom = 0; flameDraw(); }
    });
    var resized = 0;
    window.addEventListener('resize', function () {
      clearTimeout(resized);
      resized = setTimeout(showTab, 150);
    });
    show(0);
    document.body.setAttribute('data-load-ms', Math.round(performance.now()));
    document.body.setAttribute('data-ready', '1');
  }
  window.addEventListener('error', function (e) {
    document.body.setAttribute('data-error', String(e.message || e));
  });
  start();
})();
