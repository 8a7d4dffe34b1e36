// CSV output of `pshard report` and `pshard sweep`: quoting of a cell, and a file written row by row.
#pragma once

#include <fstream>
#include <string>
#include <vector>

namespace pshard::report {

// `s` as one CSV cell: quoted (with doubled quotes) when it holds a comma, a quote or a newline.
//
//   csv_cell("lr=0.1,bs=64")  ->  "\"lr=0.1,bs=64\""
std::string csv_cell(const std::string& s);

// A CSV file: the header row at construction, then one row per call; close() reports a failed write.
// A file that cannot be opened is an Error naming it.
//
//   CsvFile f(dir + "/runs.csv", {"run", "test_acc"});
//   f.row({"w4", "0.91"});
//   f.close();
class CsvFile {
 public:
  CsvFile(const std::string& path, const std::vector<std::string>& columns);
  void row(const std::vector<std::string>& cells);
  void close();

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace pshard::report
