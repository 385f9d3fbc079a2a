(function () {
  "use strict";
  // Every piece of model text reaches the page through textContent (el's `text`), never as markup.
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var O = DATA.overview;
  var SVG = "http://www.w3.org/2000/svg";
  var app = document.getElementById("app");

  function el(tag, attrs) {
    var e = document.createElement(tag);
    setAll(e, attrs);
    for (var i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    setAll(e, attrs);
    return e;
  }
  function setAll(e, attrs) {
    for (var k in attrs || {}) {
      if (attrs[k] === null || attrs[k] === undefined) continue;
      if (k === "text") e.textContent = String(attrs[k]);
      else if (k === "cls") e.setAttribute("class", attrs[k]);
      else e.setAttribute(k, String(attrs[k]));
    }
  }
  function add(e) {
    for (var i = 1; i < arguments.length; i++) {
      var kid = arguments[i];
      if (kid === null || kid === undefined) continue;
      if (Array.isArray(kid)) { kid.forEach(function (k) { add(e, k); }); continue; }
      e.appendChild(typeof kid === "object" ? kid : document.createTextNode(String(kid)));
    }
  }
  function pct(x) { return x === null || x === undefined ? "—" : x.toFixed(1) + "%"; }
  function num(x, digits) {
    if (x === null || x === undefined) return "—";
    return Number.isInteger(x) ? String(x) : x.toFixed(digits === undefined ? 3 : digits);
  }
  function fe(x) { return x === null || x === undefined ? "none" : x === -1 ? "no error" : "step " + x; }
  function table(head, rows, cls) {
    var t = el("table", {cls: cls});
    t.appendChild(el("tr", null, head.map(function (h, i) { return el("th", {cls: i ? null : "l", text: h}); })));
    rows.forEach(function (r) { t.appendChild(r); });
    return t;
  }
  function cell(value, fig, cls) { return el("td", {"data-fig": fig, cls: cls, text: value}); }

  // ------------------------------------------------------------------ overview
  function overview() {
    var sec = el("section", {id: "overview"});
    var s = DATA.sample;
    add(sec, el("h1", {text: "Labelled responses: what MC and the judge say"}));
    add(sec, el("p", {cls: "lead", text: O.responses + " responses in " + O.files.length + " file(s): " +
      O.files.map(function (f) { return f.path + " (" + f.kind + ")"; }).join(", ") + ". The overview counts every record; " +
      "the list below shows " + s.shown + " of " + s.of + " responses (a sample drawn with seed " + s.seed + ")."}));
    var tiles = el("div", {cls: "tiles"});
    function tile(k, v, fig) { add(tiles, el("div", {cls: "tile"}, el("div", {cls: "v", "data-fig": fig, text: v}), el("div", {cls: "k", text: k}))); }
    tile("responses", String(O.responses), "responses");
    if (O.set_aside.joined !== undefined) tile("joined (MC and judge)", String(O.set_aside.joined), "joined");
    if (O.kept !== null) tile("kept by consensus", String(O.kept), "kept");
    if (O.kept_share !== null) tile("kept share", pct(O.kept_share), "kept-share");
    if (O.agreement.MC && O.agreement.MC.judge) tile("MC and judge agree", pct(O.agreement.MC.judge.agree), "tile-agree");
    add(sec, tiles);

    add(sec, el("h2", {text: "Files"}));
    var rows = O.files.map(function (f, i) {
      var st = f.stats, mc = st.mc_scores || {}, judge = st.judge || {}, tokens = st.tokens || {};
      var spent = 0; for (var k in tokens) spent += tokens[k];
      return el("tr", null, el("td", {cls: "l", text: f.path}), cell(f.kind, "file-" + i + "-kind"),
        cell(String(st.records), "file-" + i + "-records"), cell(num(st.steps ? st.steps.mean : null, 2), "file-" + i + "-steps-mean"),
        cell(num(mc.mean, 4), "file-" + i + "-mc-mean"), cell(num(judge.parse_failures), "file-" + i + "-parse-failures"),
        cell(String(spent), "file-" + i + "-tokens"));
    });
    add(sec, table(["file", "kind", "records", "mean steps", "mean MC score", "judge parse failures", "tokens"], rows));
    var more = el("details", null, el("summary", {text: "every figure of `prm-annotate stats` for each file"}));
    O.files.forEach(function (f) { add(more, el("div", {cls: "pre", text: JSON.stringify(f.stats, null, 1)})); });
    add(sec, more);

    var names = Object.keys(O.agreement);
    if (names.length) {
      add(sec, el("h2", {text: "Agreement of first errors"}));
      add(sec, el("p", {cls: "lead", text: "Share of the responses both sources label on which their first errors are equal (as `prm-annotate compare` counts it), and how many they share."}));
      add(sec, table([""].concat(names), names.map(function (a) {
        return el("tr", null, el("th", {cls: "l", text: a}), names.map(function (b) {
          var c = O.agreement[a][b];
          return cell(pct(c.agree) + " (" + c.shared + ")", "agree-" + a + "-" + b, a === b ? "diag" : null);
        }));
      })));
    }
    if (Object.keys(O.matrix).length) add(sec, matrix());
    add(sec, el("h2", {text: "Where the first errors fall"}));
    add(sec, el("p", {cls: "lead", text: "Position of each source's first error relative to the response's length (step f of n at f/(n-1), in tenths); the last step is its own bar, in red: errors bunched there label outcomes, not processes."}));
    var charts = el("div", {cls: "charts"});
    Object.keys(O.positions).forEach(function (name) { add(charts, positionChart(name, O.positions[name])); });
    add(sec, charts);
    if (O.curves.mean) add(sec, curves());
    add(sec, cost());
    add(sec, aside());
    return sec;
  }

  function matrix() {
    var m = O.matrix, keys = Object.keys(m);
    var usedRow = keys.filter(function (a) { return keys.some(function (b) { return m[a][b]; }); });
    var usedCol = keys.filter(function (b) { return keys.some(function (a) { return m[a] && m[a][b]; }); });
    var box = el("div");
    add(box, el("h3", {text: "MC first error (rows) against the judge's (columns): responses"}));
    add(box, table(["MC \\ judge"].concat(usedCol.map(function (b) { return b === "-1" ? "none (-1)" : b; })), usedRow.map(function (a) {
      return el("tr", null, el("th", {cls: "l", text: a === "-1" ? "none (-1)" : a}), usedCol.map(function (b) {
        return cell(String(m[a][b]), "matrix-" + a + "-" + b, a === b ? "diag" : (m[a][b] ? null : "zero"));
      }));
    })));
    return box;
  }

  function bars(values, labels, marks, w, h, fig) {
    var s = svg("svg", {width: w, height: h, viewBox: "0 0 " + w + " " + h});
    var max = Math.max.apply(null, values.concat([1])), left = 28, bottom = 18, top = 12;
    var bw = (w - left - 4) / values.length;
    s.appendChild(svg("line", {x1: left, y1: h - bottom, x2: w - 2, y2: h - bottom, stroke: "#9aa3b2"}));
    values.forEach(function (v, i) {
      var bh = (h - bottom - top) * v / max, x = left + i * bw;
      var r = svg("rect", {x: x + 1, y: h - bottom - bh, width: Math.max(1, bw - 2), height: bh,
        fill: marks[i] ? "#d9534f" : "#5b8def", "data-fig": fig + "-" + labels[i], "data-value": v});
      var tip = svg("title"); tip.textContent = labels[i] + ": " + v; r.appendChild(tip);
      s.appendChild(r);
      var t = svg("text", {x: x + bw / 2, y: h - bottom - bh - 2, "text-anchor": "middle"}); t.textContent = String(v); s.appendChild(t);
      var l = svg("text", {x: x + bw / 2, y: h - 5, "text-anchor": "middle"}); l.textContent = labels[i]; s.appendChild(l);
    });
    return s;
  }

  function positionChart(name, hist) {
    var labels = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "last"];
    var values = labels.map(function (b) { return hist[b] || 0; });
    var marks = labels.map(function (b) { return b === "last"; });
    var found = values.reduce(function (a, b) { return a + b; }, 0);
    return el("div", {cls: "chart"}, el("div", {cls: "t", text: name + ": " + found + " first errors, " + (hist.none || 0) + " with none"}),
      bars(values, labels.map(function (b) { return b === "last" ? "last" : "." + b; }), marks, 300, 140, "pos-" + name),
      el("div", {cls: "muted", text: "tenths of the response; last = the last step", "data-fig": "pos-" + name + "-none", "data-value": hist.none || 0}));
  }

  function curves() {
    var c = O.curves, w = 420, h = 200, left = 32, bottom = 22, top = 10, right = 90;
    var s = svg("svg", {width: w, height: h, viewBox: "0 0 " + w + " " + h});
    var pw = w - left - right, ph = h - top - bottom, n = 10;
    [0, 0.5, 1].forEach(function (y) {
      var yy = top + ph * (1 - y);
      s.appendChild(svg("line", {x1: left, y1: yy, x2: left + pw, y2: yy, stroke: "#e3e6eb"}));
      var t = svg("text", {x: left - 4, y: yy + 3, "text-anchor": "end"}); t.textContent = String(y); s.appendChild(t);
    });
    var colours = {"error": "#d9534f", "no error": "#2e8b57"}, row = 0;
    Object.keys(c.mean).forEach(function (g) {
      var pts = [];
      c.mean[g].forEach(function (v, i) { if (v !== null) pts.push((left + pw * i / (n - 1)).toFixed(1) + "," + (top + ph * (1 - v)).toFixed(1)); });
      if (pts.length) s.appendChild(svg("polyline", {points: pts.join(" "), fill: "none", stroke: colours[g], "stroke-width": 2, "data-fig": "curve-" + g}));
      var t = svg("text", {x: left + pw + 6, y: top + 12 + 14 * row++, style: "fill:" + colours[g]});
      t.textContent = "MC " + g + " (" + (c.responses[g] || 0) + ")"; s.appendChild(t);
    });
    var xl = svg("text", {x: left + pw / 2, y: h - 4, "text-anchor": "middle"}); xl.textContent = "step position (0 = first, 1 = last)"; s.appendChild(xl);
    var notDrawn = c["not drawn (some steps not probed)"], skipped = Object.keys(notDrawn).map(function (k) { return notDrawn[k] + " (" + k + ")"; });
    return el("div", null, el("h2", {text: "MC score along the response"}),
      el("div", {cls: "chart"}, el("div", {cls: "t", text: "mean MC score by step position, responses MC found an error in and those it did not"}), s,
        skipped.length ? el("div", {cls: "muted", text: "not drawn, a strategy probed only some of their steps: " + skipped.join(", ")}) : null));
  }

  function cost() {
    var box = el("div");
    add(box, el("h2", {text: "Cost per stage (from the run manifests)"}));
    if (!O.cost.length) { add(box, el("p", {cls: "muted", text: "No manifest beside the files."})); return box; }
    var total = {seconds: 0, generated_tokens: 0, prompt_tokens: 0};
    var rows = O.cost.map(function (r, i) {
      for (var k in total) total[k] += r[k] || 0;
      return el("tr", null, el("td", {cls: "l", text: r.stage}), el("td", {cls: "l", text: r.file}), el("td", {cls: "l", text: r.model || "—"}),
        cell(num(r.seconds, 1), "cost-" + i + "-seconds"), cell(num(r.generated_tokens), "cost-" + i + "-generated"),
        cell(num(r.prompt_tokens), "cost-" + i + "-prompt"), cell(num(r.completions), "cost-" + i + "-completions"),
        cell(num(r.written), "cost-" + i + "-written"), cell(num(r.failed), "cost-" + i + "-failed"));
    });
    rows.push(el("tr", null, el("th", {cls: "l", text: "total"}), el("td"), el("td"), cell(num(total.seconds, 1), "cost-total-seconds"),
      cell(String(total.generated_tokens), "cost-total-generated"), cell(String(total.prompt_tokens), "cost-total-prompt"), el("td"), el("td"), el("td")));
    add(box, table(["stage", "file", "model", "seconds", "generated tokens", "prompt tokens", "completions", "written", "failed"], rows));
    return box;
  }

  function aside() {
    var a = O.set_aside, box = el("div");
    add(box, el("h2", {text: "What was set aside, and why"}));
    if (a.joined === undefined) { add(box, el("p", {cls: "muted", text: "Give a rollout and a judged file to see what consensus keeps."})); return box; }
    var rows = Object.keys(a.rows).map(function (r) {
      return el("tr", null, el("td", {cls: "l", text: r === "same" ? "kept: same first error" : "dropped: " + r}), cell(String(a.rows[r]), "aside-" + r));
    });
    ["only in rollouts", "only in judged"].forEach(function (k) {
      rows.push(el("tr", null, el("td", {cls: "l", text: "not joined: " + k}), cell(String(a[k]), "aside-" + k)));
    });
    add(box, table(["reason", "responses"], rows));
    return box;
  }

  // ------------------------------------------------------------------ responses
  var R = DATA.responses, PAGE = 50, state = {page: 0, open: {}};
  var hasThought = R.some(function (r) { return r.thought !== null && r.thought !== undefined; });
  var hasKept = R.some(function (r) { return r.kept !== undefined; });

  function verdict(v) { return v === undefined ? "absent" : v === null ? "unparsed" : v === -1 ? "no error" : "error"; }

  function filters() {
    var box = el("div", {cls: "filters"});
    function sel(name, label, options) {
      var s = el("select", {id: "f-" + name, "data-filter": name});
      options.forEach(function (o) { s.appendChild(el("option", {value: o, text: o})); });
      s.addEventListener("change", function () { state.page = 0; draw(); });
      add(box, el("label", {text: label + " "}, s));
    }
    sel("row", "MC vs judge", ["any", "disagree", "agree"].concat(["judge earlier", "judge later", "one says no error", "judge unparsed"]));
    sel("mc", "MC verdict", ["any", "error", "no error"]);
    sel("judge", "judge verdict", ["any", "error", "no error", "unparsed"]);
    if (hasKept) sel("kept", "consensus", ["any", "kept", "dropped"]);
    if (hasThought) sel("thought", "thinking", ["any", "with a thought", "without"]);
    var q = el("input", {id: "f-problem", type: "search", placeholder: "problem id or text"});
    q.addEventListener("input", function () { state.page = 0; draw(); });
    add(box, el("label", {text: "problem "}, q));
    return box;
  }

  function value(id) { var e = document.getElementById(id); return e ? e.value : "any"; }

  function matches(r) {
    var row = value("f-row"), mc = value("f-mc"), jv = value("f-judge"), kept = value("f-kept"), th = value("f-thought");
    var q = (document.getElementById("f-problem") || {value: ""}).value.trim().toLowerCase();
    if (row === "disagree" && (r.row === undefined || r.row === "same")) return false;
    if (row === "agree" && r.row !== "same") return false;
    if (row !== "any" && row !== "disagree" && row !== "agree" && r.row !== row) return false;
    if (mc !== "any" && verdict(r.mc ? r.mc.fe : undefined) !== mc) return false;
    if (jv !== "any" && verdict(r.judge ? r.judge.fe : undefined) !== jv) return false;
    if (kept === "kept" && r.kept !== true) return false;
    if (kept === "dropped" && r.kept !== false) return false;
    if (th === "with a thought" && !r.thought) return false;
    if (th === "without" && r.thought) return false;
    if (q && (r.pid || "").toLowerCase().indexOf(q) < 0 && (r.problem || "").toLowerCase().indexOf(q) < 0) return false;
    return true;
  }

  function badges(r) {
    var out = [];
    if (r.row !== undefined) out.push(el("span", {cls: "badge " + (r.row === "same" ? "agr" : "dis"), text: r.row === "same" ? "agree" : r.row}));
    if (r.mc) out.push(el("span", {cls: "badge", text: "MC: " + fe(r.mc.fe)}));
    if (r.judge) out.push(el("span", {cls: "badge", text: "judge: " + fe(r.judge.fe)}));
    if (r.kept !== undefined) out.push(el("span", {cls: "badge " + (r.kept ? "agr" : "drop"), text: r.kept ? "kept" : "dropped"}));
    if (r.gold !== undefined) out.push(el("span", {cls: "badge", text: "truth: " + fe(r.gold)}));
    if (r.thought) out.push(el("span", {cls: "badge", text: "thought: " + r.thought + " steps"}));
    return out;
  }

  function fold(text, limit) {
    if (text.length <= limit) return el("div", {cls: "stext", text: text});
    return el("details", {cls: "stext"}, el("summary", {text: text.slice(0, 160) + " … (" + text.length + " characters)"}), el("div", {text: text}));
  }

  function stepSide(r, i) {
    var side = el("div", {cls: "side"});
    if (r.mc) {
      var s = r.mc.s[i];
      add(side, el("div", {"data-role": "mc-score"}, s === null ? el("span", {cls: "muted", text: "MC: not probed"}) :
        [el("span", {cls: "score", style: "width:" + Math.round(60 * s) + "px"}), "MC " + num(s, 3)]));
    }
    if (r.judge) {
      var jf = r.judge.fe, word = jf === null ? "unparsed" : (jf === -1 || i < jf) ? "right" : i === jf ? "first error" : "after the first error";
      add(side, el("div", {"data-role": "judge-verdict", cls: word === "first error" ? "bad" : word === "right" ? "ok" : "muted", text: "judge: " + word}));
    }
    if (r.prm) add(side, el("div", {text: "PRM " + num(r.prm.s[i], 3)}));
    if (r.gold !== undefined) {
      var g = r.gold, truth = (g === -1 || i < g) ? "right" : i === g ? "wrong (first)" : "after the first error";
      add(side, el("div", {"data-role": "truth", cls: truth === "right" ? "ok" : truth === "wrong (first)" ? "bad" : "muted", text: "truth: " + truth}));
    }
    return side;
  }

  function stepRow(r, i, cls) {
    var body = el("div", null, fold(r.steps[i], 1200));
    var kept = r.mc && r.mc.kept ? r.mc.kept[i] : null;
    if (kept && kept.length) {
      var d = el("details", {"data-role": "completions"}, el("summary", {text: kept.length + " completion(s) from this step"}));
      kept.forEach(function (c) {
        add(d, el("div", {cls: c.correct ? "ok" : "bad", text: (c.correct ? "reached the answer" : c.correct === false ? "did not reach the answer" : "not graded") + (c.cut ? " (cut at max tokens)" : "")}));
        add(d, el("div", {cls: "pre", "data-role": "completion", text: c.text}));
      });
      add(body, d);
    }
    if (r.judge) {
      r.judge.per.forEach(function (per, v) {
        if (per && per[i]) add(body, el("details", {"data-role": "analysis"}, el("summary", {text: "the judge's analysis of this step" + (r.judge.per.length > 1 ? " (vote " + v + ")" : "")}),
          el("div", {cls: "pre", text: per[i]})));
      });
    }
    return el("div", {cls: "step " + cls, "data-step": i}, el("div", {cls: "muted", text: "step " + i}), body, stepSide(r, i));
  }

  function detail(r) {
    var d = el("div", {cls: "detail"});
    add(d, el("div", {cls: "muted", text: "problem" + (r.pid ? " " + r.pid : "")}), el("div", {cls: "pre", "data-role": "problem", text: r.problem || ""}));
    var facts = [];
    if (r.answer !== undefined && r.answer !== null) facts.push("final answer " + r.answer);
    if (r.correct !== undefined && r.correct !== null) facts.push(r.correct ? "graded right" : "graded wrong");
    if (r.mc) facts.push("MC (" + r.mc.strategy + ", k=" + r.mc.k + "): " + fe(r.mc.fe));
    if (r.judge) facts.push("judge: " + fe(r.judge.fe) + " (votes " + JSON.stringify(r.judge.votes) + ")");
    if (r.gold !== undefined) facts.push("truth: " + fe(r.gold));
    add(d, el("div", {cls: "side", text: facts.join(" · ")}));
    if (r.judge && r.judge.out.length) {
      r.judge.out.forEach(function (o, v) {
        add(d, el("details", {"data-role": "judge-output"}, el("summary", {text: "the judge's output" + (r.judge.out.length > 1 ? " (vote " + v + ")" : "")}), el("div", {cls: "pre", text: o})));
      });
      r.judge.errors.forEach(function (e) { add(d, el("div", {cls: "bad", text: "not parsed: " + e})); });
    }
    var jf = r.judge ? r.judge.fe : null, mf = r.mc ? r.mc.fe : null;
    var steps = el("div", {cls: "steps"});
    var thought = r.thought || 0;
    var first = thought ? el("details", {cls: "thought"}, el("summary", {text: "the thought: " + thought + " steps (folded)"})) : null;
    for (var i = 0; i < r.steps.length; i++) {
      var wrong = i === jf || i === mf, after = (jf !== null && jf >= 0 && i > jf) && (mf === null || mf < 0 || i > mf);
      var row = stepRow(r, i, (wrong ? "wrong" : after ? "after" : "") + (i < thought ? " thought" : ""));
      if (i < thought) add(first, row); else add(steps, row);
    }
    if (first) d.appendChild(first);
    // Long responses: steps past the 40th folded.
    if (steps.children.length > 40) {
      var rest = el("details", null, el("summary", {text: (steps.children.length - 40) + " more steps"}));
      while (steps.children.length > 40) rest.appendChild(steps.children[40]);
      add(steps, rest);
    }
    add(d, steps);
    return d;
  }

  function item(r) {
    var box = el("div", {cls: "resp", "data-id": r.id});
    var head = el("div", {cls: "head"}, el("span", {cls: "rid", text: r.id}), badges(r), el("span", {cls: "prob", text: r.problem || ""}));
    head.addEventListener("click", function () {
      if (box.children.length > 1) { box.removeChild(box.children[1]); delete state.open[r.id]; }
      else { box.appendChild(detail(r)); state.open[r.id] = true; }
    });
    add(box, head);
    if (state.open[r.id]) box.appendChild(detail(r));
    return box;
  }

  var list, pager;
  function draw() {
    var shown = R.filter(matches), pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    list.textContent = "";
    shown.slice(state.page * PAGE, (state.page + 1) * PAGE).forEach(function (r) { list.appendChild(item(r)); });
    pager.textContent = "";
    var prev = el("button", {type: "button", text: "previous"}), next = el("button", {type: "button", text: "next"});
    prev.disabled = state.page === 0; next.disabled = state.page >= pages - 1;
    prev.addEventListener("click", function () { state.page--; draw(); });
    next.addEventListener("click", function () { state.page++; draw(); });
    add(pager, prev, el("span", {"data-fig": "list-count", text: shown.length + " responses match; page " + (state.page + 1) + " of " + pages}), next);
  }

  function responses() {
    var sec = el("section", {id: "responses"});
    add(sec, el("h2", {text: "Responses (" + R.length + " shown of " + DATA.sample.of + "; disagreements first)"}));
    add(sec, filters());
    pager = el("div", {cls: "pager"});
    list = el("div", {id: "list"});
    add(sec, pager, list);
    return sec;
  }

  app.appendChild(overview());
  window.__overviewPainted = performance.now();
  app.appendChild(responses());
  draw();
  document.body.setAttribute("data-ready", "1");
})();
