// Terminal lines for epochs and runs.
#include "common/metrics/progress.h"

#include <cstdio>

namespace pshard {
namespace {

std::string percent_or_dash(const Json& v) {
  if (!v.is_numeric()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * v.as_number());
  return buf;
}

std::string number_or_dash(const Json& v, const char* fmt) {
  if (!v.is_numeric()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v.as_number());
  return buf;
}

Json field(const Json& j, const char* key) { return j.has(key) ? j.at(key) : Json(); }

// "  test_auc 0.7912  test_logloss 0.4521": a program's own figures (the `figures` object), when it has any.
std::string own_figures(const Json& j) {
  std::string out;
  if (!j.has("figures") || j.at("figures").type() != Json::Type::kObject) return out;
  for (const auto& [name, value] : j.at("figures").items()) out += "  " + name + " " + number_or_dash(value, "%.4f");
  return out;
}

}  // namespace

std::string format_epoch_line(const Json& e, int64_t epochs) {
  // "epoch 3/10" (the place in a run of declared length), "epoch 0 (1 of 8)" (a program's own numbering), "epoch 3"
  // (no declared length).
  const long long label = field(e, "epoch").as_int();
  char epoch[64];
  const bool own_numbering = e.has("epoch_index") && e.at("epoch_index").is_number();
  if (epochs <= 0) {
    std::snprintf(epoch, sizeof epoch, "%lld", label);
  } else if (own_numbering) {
    std::snprintf(epoch, sizeof epoch, "%lld (%lld of %lld)", label,
                  static_cast<long long>(e.at("epoch_index").as_int()), static_cast<long long>(epochs));
  } else {
    std::snprintf(epoch, sizeof epoch, "%lld/%lld", label, static_cast<long long>(epochs));
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "epoch %s  train loss %s acc %s  test loss %s acc %s  %s samples/s  %s s", epoch,
                number_or_dash(field(e, "train_loss"), "%.4f").c_str(), percent_or_dash(field(e, "train_acc")).c_str(),
                number_or_dash(field(e, "test_loss"), "%.4f").c_str(), percent_or_dash(field(e, "test_acc")).c_str(),
                number_or_dash(field(e, "samples_per_s"), "%.0f").c_str(),
                number_or_dash(field(e, "epoch_s"), "%.1f").c_str());
  std::string line = buf + own_figures(e);
  // Loss scaling: the scale the epoch ended with, and how many of its steps were skipped.
  if (e.has("loss_scale") && e.at("loss_scale").is_numeric()) {
    line += "  loss scale " + number_or_dash(e.at("loss_scale"), "%g") + ", " +
            number_or_dash(field(e, "skipped_steps"), "%.0f") + " steps skipped";
  }
  // Backup workers: the stragglers, "  late: worker 2 (46 of 50 steps)".
  if (e.has("stragglers") && e.at("stragglers").is_array() && !e.at("stragglers").elements().empty()) {
    std::string late;
    for (const Json& w : e.at("stragglers").elements()) {
      late += std::string(late.empty() ? "" : ", ") + "worker " + number_or_dash(field(w, "rank"), "%.0f") + " (" +
              number_or_dash(field(w, "late_steps"), "%.0f") + " of " + number_or_dash(field(e, "steps"), "%.0f") +
              " steps)";
    }
    line += "  late: " + late;
  }
  return line;
}

std::string format_summary_line(const Json& s, const std::string& run_dir) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "test accuracy %s (loss %s), %s epochs in %s s, %s samples/s; metrics in %s/metrics.jsonl",
                percent_or_dash(field(s, "test_acc")).c_str(), number_or_dash(field(s, "test_loss"), "%.4f").c_str(),
                number_or_dash(field(s, "epochs"), "%.0f").c_str(), number_or_dash(field(s, "wall_s"), "%.1f").c_str(),
                number_or_dash(field(s, "samples_per_s"), "%.0f").c_str(), run_dir.c_str());
  std::string line = buf;
  const std::string figures = own_figures(s);
  if (!figures.empty()) line += ";" + figures.substr(1);
  // "model_file" is null when no worker saved the model (all of them died, or no run directory).
  if (s.has("model_file") && s.at("model_file").is_string()) line += "; model " + s.at("model_file").as_string();
  if (s.has("model_file") && s.at("model_file").is_null()) line += "; no model was saved";
  // An aborted run's numbers are those of the epochs it finished: say so first.
  if (s.has("aborted") && s.at("aborted").is_string()) {
    return "aborted (" + s.at("aborted").as_string() + "): after the epochs it finished, " + line;
  }
  return "done: " + line;
}

}  // namespace pshard
