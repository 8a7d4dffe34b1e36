// CSV cells and files (see csv.h).
#include "report/csv.h"

#include "common/error.h"

namespace pshard::report {

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

CsvFile::CsvFile(const std::string& path, const std::vector<std::string>& columns)
    : path_(path), out_(path, std::ios::trunc) {
  if (!out_) throw Error(path + ": cannot write");
  row(columns);
}

void CsvFile::row(const std::vector<std::string>& cells) {
  for (size_t i = 0; i < cells.size(); ++i) out_ << (i ? "," : "") << csv_cell(cells[i]);
  out_ << "\n";
}

void CsvFile::close() {
  out_.close();
  if (!out_) throw Error(path_ + ": write failed");
}

}  // namespace pshard::report
