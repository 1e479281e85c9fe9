// The page: text in, /explain out, rendered by the server as `docattn explain` renders a report.
// User text only ever reaches the page through textContent or the server's escaped HTML.
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var keyNeeded = false;

  function headers() {
    var h = {"Content-Type": "application/json"};
    if ($("key").value) h["X-API-Key"] = $("key").value;
    return h;
  }

  function status(text, isError) {
    $("status").textContent = text;
    $("status").className = isError ? "error" : "";
  }

  function loadModels() {
    fetch("/models", {headers: headers()}).then(function (r) {
      if (r.status === 401) { keyNeeded = true; $("key-row").hidden = false; status("this server needs an API key"); return null; }
      return r.json();
    }).then(function (data) {
      if (!data) return;
      var select = $("model");
      select.textContent = "";
      data.models.forEach(function (m) {
        var o = document.createElement("option");
        o.value = m.name;
        o.textContent = m.name + " (" + m.model + ")";
        select.appendChild(o);
      });
      $("model-row").hidden = data.models.length < 2;
    }).catch(function () { status("cannot reach the server", true); });
  }

  function showProbabilities(probs) {
    var box = $("probabilities");
    box.textContent = "";
    Object.keys(probs).sort(function (a, b) { return probs[b] - probs[a]; }).forEach(function (c) {
      var row = document.createElement("div"), name = document.createElement("span"),
          track = document.createElement("span"), fill = document.createElement("span"), value = document.createElement("span");
      row.className = "row"; name.className = "name"; track.className = "track"; fill.className = "fill";
      name.textContent = c; name.title = c;
      fill.style.display = "block"; fill.style.width = (100 * probs[c]).toFixed(1) + "%";
      value.textContent = probs[c].toFixed(3);
      track.appendChild(fill); row.appendChild(name); row.appendChild(track); row.appendChild(value);
      row.setAttribute("aria-label", c + ": " + probs[c].toFixed(3));
      box.appendChild(row);
    });
  }

  function showViews(views) {
    var select = $("view");
    select.textContent = "";
    var names = ["attention"].concat((views || []).map(function (v) { return v.name; }));
    names.forEach(function (n) {
      var o = document.createElement("option");
      o.value = n; o.textContent = n === "attention" ? "model attention" : n;
      select.appendChild(o);
    });
    $("view-row").hidden = names.length < 2;
  }

  function submit(event) {
    event.preventDefault();
    var text = $("text").value;
    if (!text.trim()) { status("paste a document first", true); $("text").focus(); return; }
    var body = {text: text, html: true};
    if (!$("model-row").hidden) body.model = $("model").value;
    status("working...");
    $("submit").disabled = true;
    fetch("/explain", {method: "POST", headers: headers(), body: JSON.stringify(body)}).then(function (r) {
      return r.json().then(function (data) { return {ok: r.ok, data: data}; });
    }).then(function (res) {
      if (!res.ok) { status(res.data.error || "request failed", true); return; }
      var item = res.data.explanations[0];
      $("prediction").textContent = item.prediction;
      showProbabilities(item.probabilities);
      $("document").innerHTML = item.html;  // rendered and escaped by the server (explain/html.py)
      showViews(item.views);
      $("level").value = "combined";
      setLevel("combined");
      setView("attention");
      $("result").hidden = false;
      status("");
    }).catch(function () { status("cannot reach the server", true); })
      .finally(function () { $("submit").disabled = false; });
  }

  function readFile(file) {
    if (!file) return;
    var reader = new FileReader();
    reader.onload = function () { $("text").value = reader.result; status("read " + file.name); };
    reader.readAsText(file);
  }

  $("form").addEventListener("submit", submit);
  $("file").addEventListener("change", function () { readFile($("file").files[0]); });
  $("level").addEventListener("change", function () { setLevel($("level").value); });
  $("view").addEventListener("change", function () { setView($("view").value); });
  $("key").addEventListener("change", loadModels);
  var area = $("text");
  area.addEventListener("dragover", function (e) { e.preventDefault(); area.classList.add("drop"); });
  area.addEventListener("dragleave", function () { area.classList.remove("drop"); });
  area.addEventListener("drop", function (e) {
    e.preventDefault(); area.classList.remove("drop");
    readFile(e.dataTransfer.files[0]);
  });
  loadModels();
})();
