// load_criteo: exact values, missing fields, bucket hashing, max_samples, and every kind of bad line named.
#include "worker/data/criteo.h"

#include <gtest/gtest.h>
#include <stdio.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "tests/worker/data/temp_dir.h"

namespace pshard::data {
namespace {

using testing::error_of;
using testing::TempDir;
using testing::write_all;

// The 40 fields of a good line: the label, integers 1..13, categories 00000abc, 00001abc, ... 00019abc.
std::vector<std::string> good_fields(const std::string& label) {
  std::vector<std::string> f = {label};
  for (int j = 1; j <= 13; ++j) f.push_back(std::to_string(j));
  for (unsigned j = 0; j < 26; ++j) {
    char hex[9];
    snprintf(hex, sizeof(hex), "%08x", 0x1000u * j + 0xabcu);
    f.push_back(hex);
  }
  return f;
}

std::string join(const std::vector<std::string>& f) {
  std::string s;
  for (size_t i = 0; i < f.size(); ++i) s += (i ? "\t" : "") + f[i];
  return s + "\n";
}

// A good line with field `column` (0-based) set to `value`.
std::string line(const std::string& label, int column = -1, const std::string& value = "") {
  std::vector<std::string> f = good_fields(label);
  if (column >= 0) f[static_cast<size_t>(column)] = value;
  return join(f);
}

TEST(Criteo, ParsesValuesMissingFieldsAndCrlf) {
  TempDir dir;
  std::string path = dir.file("day_0");
  // Line 1: every field present. Line 2: I1 missing, I2 negative, I13 large, C1 upper case, C26 missing.
  // Line 3: CRLF, every integer and category missing, and no final newline.
  std::vector<std::string> f = good_fields("0");
  f[1] = "";
  f[2] = "-3";
  f[13] = "9223372036854775807";
  f[14] = "68FD1E64";
  f[39] = "";
  std::string second = join(f);
  std::string third = "1" + std::string(39, '\t') + "\r";
  write_all(path, line("1") + second + third);

  CtrDataset d = load_criteo(path);
  d.check_consistent(path);
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.name, "criteo");
  EXPECT_EQ(d.num_dense, 13);
  EXPECT_EQ(d.num_fields, 26);
  EXPECT_EQ(d.cardinality, std::vector<uint64_t>(26, 0));
  EXPECT_EQ(d.labels, (std::vector<float>{1, 0, 1}));
  EXPECT_TRUE(d.click_prob.empty());
  for (int j = 0; j < 13; ++j) {
    EXPECT_EQ(d.dense_row(0)[j], static_cast<float>(std::log1p(static_cast<double>(j + 1)))) << "I" << j + 1;
    EXPECT_EQ(d.dense_row(2)[j], 0.0f) << "missing I" << j + 1;
  }
  for (int j = 0; j < 26; ++j) {
    EXPECT_EQ(d.id_row(0)[j], 0x1000u * static_cast<unsigned>(j) + 0xabcu) << "C" << j + 1;
    EXPECT_EQ(d.id_row(2)[j], kCriteoMissingId) << "missing C" << j + 1;
  }
  EXPECT_EQ(d.dense_row(1)[0], 0.0f);                                                  // missing
  EXPECT_EQ(d.dense_row(1)[1], 0.0f);                                                  // -3 clips to 0
  EXPECT_EQ(d.dense_row(1)[2], static_cast<float>(std::log(4.0)));                     // 3
  EXPECT_EQ(d.dense_row(1)[12], static_cast<float>(std::log(9223372036854775807.0)));  // log1p(2^63 - 1)
  EXPECT_EQ(d.id_row(1)[0], 0x68fd1e64u);
  EXPECT_EQ(d.id_row(1)[1], 0x1abcu);
  EXPECT_EQ(d.id_row(1)[25], kCriteoMissingId);
  EXPECT_EQ(kCriteoMissingId, 4294967296u);
}

TEST(Criteo, BucketsHashIdsAndMissingGetsTheLastBucket) {
  TempDir dir;
  std::string path = dir.file("train.txt");
  write_all(path, line("0", 14, "ffffffff") + line("1", 15, ""));
  CriteoOptions o;
  o.buckets = 1000;
  CtrDataset d = load_criteo(path, o);
  d.check_consistent(path);
  EXPECT_EQ(d.cardinality, std::vector<uint64_t>(26, 1001));
  EXPECT_EQ(d.id_row(0)[0], 4294967295u % 1000);  // 295
  EXPECT_EQ(d.id_row(0)[0], 295u);
  EXPECT_EQ(d.id_row(0)[1], 0x1abcu % 1000);  // 6844 % 1000
  EXPECT_EQ(d.id_row(1)[1], 1000u);           // missing
  for (int j = 0; j < 26; ++j) EXPECT_LE(d.id_row(1)[j], 1000u);
}

TEST(Criteo, MaxSamplesReadsTheFirstLines) {
  TempDir dir;
  std::string path = dir.file("train.txt");
  // The third line is bad, but max_samples = 2 stops before it.
  write_all(path, line("0") + line("1") + "garbage\n");
  CriteoOptions o;
  o.max_samples = 2;
  CtrDataset d = load_criteo(path, o);
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.labels, (std::vector<float>{0, 1}));
  EXPECT_EQ(d.ids.size(), 52u);
  EXPECT_EQ(d.dense.size(), 26u);
}

TEST(Criteo, BadLinesNameTheFileLineAndField) {
  TempDir dir;
  std::string path = dir.file("bad.txt");
  auto error_with = [&](const std::string& second_line) {
    write_all(path, line("0") + second_line + line("1"));
    return error_of([&] { load_criteo(path); });
  };
  std::string at = "criteo " + path + " line 2";
  EXPECT_EQ(error_with("0\t1\t2\n"), at + ": 3 fields, expected 40 (label, I1-I13, C1-C26; tab-separated)");
  EXPECT_EQ(error_with(line("0") + "\n"),
            "criteo " + path + " line 3: 1 fields, expected 40 (label, I1-I13, C1-C26; tab-separated)");
  EXPECT_EQ(error_with(line("2")), at + ", field 1 (label): \"2\" is not a label (0 or 1)");
  EXPECT_EQ(error_with(line("")), at + ", field 1 (label): \"\" is not a label (0 or 1)");
  EXPECT_EQ(error_with(line("0", 4, "1.5")), at + ", field 5 (I4): \"1.5\" is not an integer");
  EXPECT_EQ(error_with(line("0", 13, "12a")), at + ", field 14 (I13): \"12a\" is not an integer");
  EXPECT_EQ(error_with(line("0", 1, "+4")), at + ", field 2 (I1): \"+4\" is not an integer");
  EXPECT_EQ(error_with(line("0", 2, "99999999999999999999")),
            at + ", field 3 (I2): \"99999999999999999999\" is out of the int64 range");
  EXPECT_EQ(error_with(line("0", 14, "68fd1e6g")),
            at + ", field 15 (C1): \"68fd1e6g\" is not a category (8 hex digits)");
  EXPECT_EQ(error_with(line("0", 39, "68fd1e6")),
            at + ", field 40 (C26): \"68fd1e6\" is not a category (8 hex digits)");
  EXPECT_EQ(error_with(line("0", 20, "-8fd1e64")),
            at + ", field 21 (C7): \"-8fd1e64\" is not a category (8 hex digits)");
  EXPECT_EQ(error_with(line("0", 39, std::string(50, 'x'))),
            at + ", field 40 (C26): \"" + std::string(40, 'x') + "...\" is not a category (8 hex digits)");

  write_all(path, "");
  EXPECT_EQ(error_of([&] { load_criteo(path); }), "criteo " + path + ": empty file (no samples)");
  std::string missing = dir.file("none.txt");
  EXPECT_EQ(error_of([&] { load_criteo(missing); }), "criteo " + missing + ": cannot open: No such file or directory");
}

// data.name = criteo: the two files as data sets of two classes, 13 dense features, 26 tables of buckets + 1 rows, the
// first data.train_size / data.test_size lines; a missing path is named.
TEST(Criteo, LoadDataReadsBothFilesAsTwoClassSetsWithOneTableAField) {
  TempDir dir;
  write_all(dir.file("train.txt"), line("1") + line("0", 14, "") + line("0"));
  write_all(dir.file("test.txt"), line("0") + line("1"));
  const Config cfg =
      Config::from_string("[data]\nname = \"criteo\"\ncardinality = 1000\ntrain_size = 2\ntrain_path = \"" +
                              dir.file("train.txt") + "\"\ntest_path = \"" + dir.file("test.txt") + "\"\n",
                          "criteo.toml");
  const DataSplits s = load_data(cfg);
  EXPECT_EQ(s.train.size(), 2);  // data.train_size keeps the first 2 lines
  EXPECT_EQ(s.test.size(), 2);
  EXPECT_EQ(s.train.num_classes, 2);
  EXPECT_EQ(s.train.sample_shape, std::vector<int64_t>{13});
  EXPECT_EQ(s.train.id_fields, 26);
  EXPECT_EQ(s.train.table_rows, std::vector<uint64_t>(26, 1001));
  EXPECT_EQ(s.train.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_FLOAT_EQ(s.train.features[0], std::log(2.0f));  // I1 = 1 -> log(1 + 1)
  EXPECT_EQ(s.train.ids[0], 0xabcu % 1000);              // C1 = 00000abc
  EXPECT_EQ(s.train.ids[26], 1000u);                     // the second line's C1 is missing: id = buckets
  const Config no_test =
      Config::from_string("[data]\nname = \"criteo\"\ntrain_path = \"" + dir.file("train.txt") + "\"\n", "criteo.toml");
  EXPECT_EQ(error_of([&] { load_data(no_test); }),
            "criteo.toml: data.name = criteo needs data.train_path and data.test_path (Criteo's tab-separated click "
            "logs)");
}

}  // namespace
}  // namespace pshard::data
