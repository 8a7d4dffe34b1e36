// Config loading: values, overrides, and errors that name the key and file.
#include "common/config/config.h"

#include <gtest/gtest.h>

#include "common/config/job_shape.h"
#include "common/config/schema.h"
#include "common/error.h"

namespace {

using pshard::Config;
using pshard::JobShape;

std::string error_of(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  try {
    Config::from_string(toml, "test.toml", overrides);
  } catch (const pshard::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ReadsValuesAndDefaults) {
  Config cfg = Config::from_string("[optimizer]\nname = \"adam\"\nlr = 0.5\n[model]\nhidden = [32, 16]\n", "t.toml");
  EXPECT_EQ(cfg.get_string("optimizer.name"), "adam");
  EXPECT_DOUBLE_EQ(cfg.get_double("optimizer.lr"), 0.5);
  EXPECT_EQ(cfg.get_int_list("model.hidden"), (std::vector<int64_t>{32, 16}));
  EXPECT_TRUE(cfg.is_set("optimizer.lr"));
  EXPECT_FALSE(cfg.is_set("optimizer.beta1"));
  EXPECT_DOUBLE_EQ(cfg.get_double("optimizer.beta1"), 0.9);
}

TEST(Config, IntegerAcceptedForFloat) {
  Config cfg = Config::from_string("[optimizer]\nlr = 1\n", "t.toml");
  EXPECT_DOUBLE_EQ(cfg.get_double("optimizer.lr"), 1.0);
}

TEST(Config, OverridesWin) {
  Config cfg = Config::from_string("[train]\nepochs = 3\n", "t.toml", {"train.epochs=7", "model.hidden=8,4"});
  EXPECT_EQ(cfg.get_int("train.epochs"), 7);
  EXPECT_EQ(cfg.get_int_list("model.hidden"), (std::vector<int64_t>{8, 4}));
}

TEST(Config, UnknownKeyNamesKeyAndFile) {
  std::string e = error_of("[optimizer]\nlrr = 0.1\n");
  EXPECT_NE(e.find("test.toml"), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer.lrr"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
}

TEST(Config, WrongTypeIsAnError) {
  std::string e = error_of("[train]\nepochs = \"ten\"\n");
  EXPECT_NE(e.find("train.epochs"), std::string::npos) << e;
  EXPECT_NE(e.find("expected an integer"), std::string::npos) << e;
}

TEST(Config, OutOfRangeIsAnError) {
  std::string e = error_of("[optimizer]\nlr = -1.0\n");
  EXPECT_NE(e.find("optimizer.lr"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

// Values a server, a schedule or an allocation would refuse later are refused where every command reads its config,
// with the key named: `pshard config --check` says what `pshard launch` would.
TEST(Config, ValuesThatFailLaterAreRefusedWhenTheConfigIsRead) {
  auto refused = [](const std::vector<std::string>& overrides) -> std::string {
    try {
      Config::from_string("", "t.toml", overrides);
    } catch (const pshard::Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_NE(refused({"optimizer.lr=1e300"}).find("key 'optimizer.lr': value 1.0000000000000001e+300 is out of range"),
            std::string::npos)
      << refused({"optimizer.lr=1e300"});
  EXPECT_EQ(refused({"lr_schedule.name=cosine", "optimizer.lr=0.1", "lr_schedule.min_lr=0.5"}),
            "config t.toml: key 'lr_schedule.min_lr': 0.5 is above optimizer.lr = 0.10000000000000001: the cosine "
            "schedule decays from lr down to min_lr");
  EXPECT_EQ(refused({"lr_schedule.name=cosine", "optimizer.lr=0.5", "lr_schedule.min_lr=0.1"}), "(accepted)");
  EXPECT_EQ(refused({"data.image_shape=[65536,65536,65536]"}),
            "config t.toml: key 'data.image_shape': [65536, 65536, 65536] holds more than 16777216 values per sample "
            "(64 MiB of float32): lower the shape");
  EXPECT_EQ(refused({"data.image_shape=[3,224,224]"}), "(accepted)");
  EXPECT_NE(refused({"trace.steps=0-5000"}).find("key 'trace.steps': '0-5000' is 5001 steps, more than the 1000"),
            std::string::npos)
      << refused({"trace.steps=0-5000"});
  EXPECT_EQ(refused({"trace.steps=100-1099"}), "(accepted)");
}

TEST(Config, BadChoiceIsAnError) {
  std::string e = error_of("[log]\nlevel = \"loud\"\n");
  EXPECT_NE(e.find("key 'log.level': 'loud' is not one of debug|info|warn|error"), std::string::npos) << e;
  e = error_of("", {"train.cuda_conv_wgrad=fft"});
  EXPECT_NE(e.find("key 'train.cuda_conv_wgrad': 'fft' is not one of gemm|cudnn"), std::string::npos) << e;
  EXPECT_EQ(Config::from_string("", "t.toml").get_string("train.cuda_conv_wgrad"), "gemm");
}

TEST(Config, InstalledChoicesAreCheckedLikeBuiltInOnes) {
  // model.name's choices belong to the model zoo above common: any string until a program installs them.
  EXPECT_EQ(error_of("[model]\nname = \"anything\"\n"), "");
  pshard::install_config_choices("model.name", {"linreg", "mlp", "lenet"});
  EXPECT_STREQ(pshard::find_config_key("model.name")->choices, "linreg|mlp|lenet");
  EXPECT_EQ(Config::from_string("[model]\nname = \"lenet\"\n", "t.toml").get_string("model.name"), "lenet");
  std::string e = error_of("", {"model.name=resnet21"});
  EXPECT_NE(e.find("key 'model.name': 'resnet21' is not one of linreg|mlp|lenet"), std::string::npos) << e;
  // Installing again replaces the list; keys with built-in choices, non-string keys, a list without the default and
  // a choice that cannot be written in "a|b" are refused.
  pshard::install_config_choices("model.name", {"mlp", "lenet"});
  EXPECT_NE(error_of("[model]\nname = \"linreg\"\n").find("not one of mlp|lenet"), std::string::npos);
  EXPECT_THROW(pshard::install_config_choices("log.level", {"info"}), pshard::Error);
  EXPECT_THROW(pshard::install_config_choices("train.epochs", {"1"}), pshard::Error);
  EXPECT_THROW(pshard::install_config_choices("no.key", {"mlp"}), pshard::Error);
  EXPECT_THROW(pshard::install_config_choices("model.name", {"lenet"}), pshard::Error);
  EXPECT_THROW(pshard::install_config_choices("model.name", {"mlp", "a|b"}), pshard::Error);
  EXPECT_STREQ(pshard::find_config_key("model.name")->choices, "mlp|lenet");
}

TEST(Config, SyntaxErrorNamesLine) {
  std::string e = error_of("[optimizer]\nlr = = 3\n");
  EXPECT_NE(e.find("test.toml: line 2"), std::string::npos) << e;
}

TEST(Config, BadOverrideIsAnError) {
  EXPECT_NE(error_of("", {"train.epochs=abc"}).find("train.epochs"), std::string::npos);
  EXPECT_NE(error_of("", {"nokey"}).find("expected section.key=value"), std::string::npos);
  EXPECT_NE(error_of("", {"train.nothing=1"}).find("unknown key"), std::string::npos);
}

TEST(Config, Bf16JobDefaultsItsWireEncodingsToBf16) {
  // train.precision = bf16 pushes and pulls bfloat16 unless the config names the encodings; the written config says
  // so, since the servers and workers of a launched job load it.
  Config bf16 = Config::from_string("[train]\nprecision = \"bf16\"\n", "t.toml");
  EXPECT_EQ(bf16.get_string("cluster.compression"), "bf16");
  EXPECT_EQ(bf16.get_string("cluster.pull_precision"), "bf16");
  EXPECT_EQ(Config::from_string(bf16.to_toml(), "dump.toml").get_string("cluster.pull_precision"), "bf16");
  Config named = Config::from_string("[train]\nprecision = \"bf16\"\n[cluster]\ncompression = \"none\"\n", "t.toml",
                                     {"cluster.pull_precision=fp32"});
  EXPECT_EQ(named.get_string("cluster.compression"), "none");
  EXPECT_EQ(named.get_string("cluster.pull_precision"), "fp32");
  Config fp32 = Config::from_string("", "t.toml");
  EXPECT_EQ(fp32.get_string("cluster.compression"), "none");
  EXPECT_EQ(fp32.get_string("cluster.pull_precision"), "fp32");
}

TEST(Config, EveryBackendTakesBf16AndFp16) {
  // The CUDA backend computes bf16 and fp16 on tensor cores (checked on a GPU by scripts/gpu-check.sh), with the
  // CPU's loss scaling for fp16; a precision no backend computes is refused, naming the key.
  for (const char* precision : {"bf16", "fp16"}) {
    Config cuda = Config::from_string("", "t.toml", {std::string("train.precision=") + precision, "train.device=cuda"});
    EXPECT_EQ(cuda.get_string("train.precision"), precision);
    EXPECT_EQ(cuda.get_string("train.loss_scaling"), std::string(precision) == "fp16" ? "dynamic" : "none");
  }
  EXPECT_NE(error_of("", {"train.precision=int8"}).find("train.precision"), std::string::npos);
}

// A heartbeat period at or above the silence that declares a node dead: refused with the config (config --check,
// before a launch claims its run directory), not by the first server.
TEST(Config, HeartbeatIntervalMustBeShorterThanItsTimeout) {
  const std::string why = error_of("", {"cluster.heartbeat_interval_ms=5000", "cluster.heartbeat_timeout_ms=5000"});
  EXPECT_NE(why.find("cluster.heartbeat_interval_ms"), std::string::npos) << why;
  EXPECT_NE(why.find("5000 is not shorter than cluster.heartbeat_timeout_ms = 5000"), std::string::npos) << why;
  EXPECT_EQ(Config::from_string("", "t.toml", {"cluster.heartbeat_interval_ms=100", "cluster.heartbeat_timeout_ms=101"})
                .get_int("cluster.heartbeat_timeout_ms"),
            101);
}

// An elastic job's length in steps is not known before it runs: a cosine schedule needs lr_schedule.total_steps.
TEST(Config, ElasticJobsNeedACosineScheduleLength) {
  const std::string why = error_of("", {"cluster.min_workers=2", "lr_schedule.name=cosine"});
  EXPECT_NE(why.find("key 'lr_schedule.total_steps'"), std::string::npos) << why;
  EXPECT_NE(why.find("elastic job"), std::string::npos) << why;
  EXPECT_NO_THROW(Config::from_string("", "t.toml", {"lr_schedule.name=cosine"}));  // not elastic: the run's length
  EXPECT_NO_THROW(Config::from_string(
      "", "t.toml", {"cluster.min_workers=2", "lr_schedule.name=cosine", "lr_schedule.total_steps=900"}));
}

// What needs a fixed membership, or a resume from a checkpoint, is refused with the config of an elastic job, so that
// every entry point (launch, task, the workers, the C API) refuses it alike, naming the key; the same keys pass
// without cluster.min_workers.
TEST(Config, ElasticJobsRefuseWhatNeedsAFixedMembership) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"cluster.mode=async", "key 'cluster.mode': 'async' in an elastic job"},
      {"train.precision=fp16", "key 'train.loss_scaling': 'dynamic' in an elastic job"},
      {"cluster.restart_workers=true", "key 'cluster.restart_workers': true in an elastic job"},
      {"cluster.server_failure_policy=restart", "key 'cluster.server_failure_policy': 'restart' in an elastic job"},
      {"checkpoint.on_sigterm=checkpoint", "key 'checkpoint.on_sigterm': 'checkpoint' in an elastic job"},
  };
  for (const auto& [set, expect] : cases) {
    std::vector<std::string> sets = {set};
    if (set == "cluster.restart_workers=true") sets.push_back("cluster.failure_policy=continue");
    EXPECT_NO_THROW(Config::from_string("", "t.toml", sets)) << set;
    sets.push_back("cluster.min_workers=2");
    const std::string why = error_of("", sets);
    EXPECT_NE(why.find(expect), std::string::npos) << set << ": " << why;
  }
}

// One push per host is refused with the config when it is forced on a job it cannot serve (naming every setting it
// needs, a bf16 job's derived compression among them), so that no worker has started when the job fails; `auto`
// leaves such a job pushing per worker, and JobShape::host_aggregation_needs says why.
TEST(Config, ForcedHostAggregationNamesWhatTheJobLacks) {
  const std::string why = error_of("", {"cluster.host_aggregation=always", "cluster.mode=async",
                                        "cluster.failure_policy=continue", "train.precision=bf16"});
  EXPECT_NE(why.find("key 'cluster.host_aggregation': always needs cluster.mode = sync, cluster.failure_policy = "
                     "abort, cluster.compression = none"),
            std::string::npos)
      << why;
  const Config elastic = Config::from_string("", "t.toml", {"cluster.min_workers=2"});
  EXPECT_EQ(JobShape::from_config(elastic).host_aggregation_needs(),
            std::vector<std::string>{"cluster.min_workers = 0"});
  EXPECT_NE(error_of("", {"cluster.min_workers=2", "cluster.host_aggregation=always"})
                .find("always needs cluster.min_workers = 0"),
            std::string::npos);
  const std::vector<std::string> restart = {"cluster.restart_workers=true", "cluster.failure_policy=continue"};
  EXPECT_EQ(JobShape::from_config(Config::from_string("", "t.toml", restart)).host_aggregation_needs(),
            (std::vector<std::string>{"cluster.failure_policy = abort", "cluster.restart_workers = false"}));
  EXPECT_TRUE(JobShape::from_config(Config::defaults()).host_aggregation_needs().empty());
  // A step skipped for loss scaling is said by each worker's own pushes, not by a host's sum (fp16: scaled by auto).
  EXPECT_EQ(JobShape::from_config(Config::from_string("", "t.toml", {"train.precision=fp16"})).host_aggregation_needs(),
            std::vector<std::string>{"train.loss_scaling = none"});
  EXPECT_NE(error_of("", {"train.loss_scaling=static", "cluster.host_aggregation=always"})
                .find("always needs train.loss_scaling = none"),
            std::string::npos);
  EXPECT_NO_THROW(Config::from_string("", "t.toml", {"cluster.host_aggregation=always"}));
  EXPECT_NO_THROW(Config::from_string("", "t.toml", {"cluster.mode=async"}));  // auto: off for this job
}

// A config that names an update rule gets torch.optim's defaults of that rule for what it leaves unset; what it sets
// wins; the written config says what the job used.
TEST(Config, UpdateRulesGetTorchOptimDefaultsWhereUnset) {
  auto get = [](const std::vector<std::string>& sets, const char* key) {
    return Config::from_string("", "t.toml", sets).get_double(key);
  };
  EXPECT_DOUBLE_EQ(get({"optimizer.name=adadelta"}, "optimizer.eps"), 1e-6);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=adadelta"}, "optimizer.lr"), 1.0);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=adadelta"}, "optimizer.rho"), 0.9);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=rmsprop"}, "optimizer.rho"), 0.99);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=rmsprop"}, "optimizer.eps"), 1e-8);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=adagrad"}, "optimizer.eps"), 1e-10);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=adam"}, "optimizer.lr"), 0.001);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=adamw"}, "optimizer.weight_decay"), 0.01);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=adam"}, "optimizer.weight_decay"), 0.0);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=sgd"}, "optimizer.lr"), 0.01);
  EXPECT_DOUBLE_EQ(get({"optimizer.name=lamb"}, "optimizer.eps"), 1e-8);
  // Set in the file or by --set: kept.
  EXPECT_DOUBLE_EQ(get({"optimizer.name=adadelta", "optimizer.eps=1e-8"}, "optimizer.eps"), 1e-8);
  const Config file = Config::from_string("[optimizer]\nname = \"rmsprop\"\nrho = 0.5\nlr = 0.1\n", "t.toml");
  EXPECT_DOUBLE_EQ(file.get_double("optimizer.rho"), 0.5);
  EXPECT_DOUBLE_EQ(file.get_double("optimizer.lr"), 0.1);
  // The written config holds the resolved values, so a job's servers and workers (which read it) use them.
  const Config written =
      Config::from_string(Config::from_string("", "t.toml", {"optimizer.name=adadelta"}).to_toml(), "dump.toml");
  EXPECT_DOUBLE_EQ(written.get_double("optimizer.eps"), 1e-6);
  EXPECT_DOUBLE_EQ(written.get_double("optimizer.lr"), 1.0);
}

// train.loss_scaling = auto is resolved when the config is read: dynamic for fp16 (which pulls fp16 weights and
// pushes float32 gradients, since unscaled gradients below half's range would arrive as zeros), none otherwise.
TEST(Config, Fp16JobScalesItsLossAndPushesFloat32Gradients) {
  Config fp16 = Config::from_string("[train]\nprecision = \"fp16\"\n", "t.toml");
  EXPECT_EQ(fp16.get_string("train.loss_scaling"), "dynamic");
  EXPECT_EQ(fp16.get_string("cluster.pull_precision"), "fp16");
  EXPECT_EQ(fp16.get_string("cluster.compression"), "none");
  EXPECT_EQ(Config::from_string(fp16.to_toml(), "dump.toml").get_string("train.loss_scaling"), "dynamic");
  EXPECT_EQ(Config::from_string("", "t.toml").get_string("train.loss_scaling"), "none");
  EXPECT_EQ(Config::from_string("", "t.toml", {"train.precision=bf16"}).get_string("train.loss_scaling"), "none");
  EXPECT_EQ(Config::from_string("", "t.toml", {"train.precision=fp16", "train.loss_scaling=none"})
                .get_string("train.loss_scaling"),
            "none");
  // A restarted worker, which would start from a loss scale of its own, is refused, naming the key.
  const std::string restart =
      error_of("", {"train.loss_scaling=static", "cluster.failure_policy=continue", "cluster.restart_workers=true"});
  EXPECT_NE(restart.find("train.loss_scaling"), std::string::npos) << restart;
  EXPECT_NE(restart.find("cluster.restart_workers"), std::string::npos) << restart;
  EXPECT_EQ(Config::from_string("", "t.toml", {"train.loss_scaling=static", "train.device=cuda"})
                .get_string("train.loss_scaling"),
            "static");
  EXPECT_NE(error_of("", {"train.loss_scale=0"}).find("train.loss_scale"), std::string::npos);
}

TEST(Config, ToTomlRoundTrips) {
  Config a = Config::from_string("[optimizer]\nname = \"lamb\"\nlr = 0.25\n", "t.toml");
  Config b = Config::from_string(a.to_toml(), "dump.toml");
  EXPECT_EQ(b.get_string("optimizer.name"), "lamb");
  EXPECT_DOUBLE_EQ(b.get_double("optimizer.lr"), 0.25);
  EXPECT_EQ(b.to_toml(), a.to_toml());
}

// Found by fuzz_config: to_toml() wrote string values unescaped, so a run name with a quote
// gave a config.toml that does not load.
TEST(Config, ToTomlEscapesQuotesAndBackslashes) {
  Config a = Config::from_string("[run]\nname = 'say \"hi\" \\o/'\n", "t.toml", {"data.dir=/d/a\"b"});
  EXPECT_EQ(a.get_string("run.name"), "say \"hi\" \\o/");
  Config b = Config::from_string(a.to_toml(), "dump.toml");
  EXPECT_EQ(b.get_string("run.name"), "say \"hi\" \\o/");
  EXPECT_EQ(b.get_string("data.dir"), "/d/a\"b");
  EXPECT_EQ(b.to_toml(), a.to_toml());
}

// Control characters and invalid UTF-8 cannot be written back as TOML: refused with the key named.
TEST(Config, StringsWithControlCharactersOrBadUtf8AreErrors) {
  std::string e = error_of("[run]\nname = \"a\\nb\"\n");
  EXPECT_NE(e.find("run.name"), std::string::npos) << e;
  EXPECT_NE(e.find("control character 0x0a"), std::string::npos) << e;
  e = error_of("", {"data.dir=/d/\xff"});
  EXPECT_NE(e.find("data.dir"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid UTF-8"), std::string::npos) << e;
  EXPECT_EQ(error_of("[run]\nname = \"gr\u00fc\u00df \u6e2c\"\n"), "");  // UTF-8 is fine
}

}  // namespace

// Found by fuzz_config (CI, 2026-11-26): an override of quotes only. A --set string loses the one pair of quotes
// around it; a TOML string (already unquoted by the parser) keeps quotes that are its own.
TEST(Config, OverrideOfQuotesRoundTrips) {
  EXPECT_EQ(Config::from_string("", "t.toml", {"run.name=\"x y\""}).get_string("run.name"), "x y");
  EXPECT_EQ(Config::from_string("[run]\nname = '\"x\"'\n", "t.toml").get_string("run.name"), "\"x\"");
  const std::string quotes(56, '"');
  Config a = Config::from_string("[run]\nname = \"a\\\"b\"\n", "t.toml", {"data.dir=" + quotes});
  Config b = Config::from_string(a.to_toml(), "dump.toml");
  EXPECT_EQ(b.get_string("data.dir"), a.get_string("data.dir"));
  EXPECT_EQ(b.to_toml(), a.to_toml()) << a.to_toml();
}

namespace pshard {
namespace {

TEST(Config, TheTablesRuleGetsItsOwnDefaultsAndConfigTomlKeepsThem) {
  // adagrad on the tables beside sgd: adagrad's eps, the schema's lr; the dense rule keeps its own.
  Config a = Config::from_string("[optimizer]\nname = \"sgd\"\n[embedding]\noptimizer = \"adagrad\"\n", "t.toml");
  EXPECT_DOUBLE_EQ(a.get_double("embedding.eps"), 1e-10);
  EXPECT_DOUBLE_EQ(a.get_double("embedding.lr"), 0.01);
  EXPECT_DOUBLE_EQ(a.get_double("optimizer.eps"), 1e-8);
  // A resumed run reads config.toml, where every key is set: the same values.
  Config again = Config::from_string(a.to_toml(), "config.toml");
  EXPECT_DOUBLE_EQ(again.get_double("embedding.eps"), 1e-10);
  // optimizer.* set in the config is the tables' too; embedding.* set wins over both.
  Config b = Config::from_string("[optimizer]\nlr = 0.3\neps = 1e-6\n[embedding]\noptimizer = \"adam\"\n", "t.toml");
  EXPECT_DOUBLE_EQ(b.get_double("embedding.lr"), 0.3);
  EXPECT_DOUBLE_EQ(b.get_double("embedding.eps"), 1e-6);
  Config c = Config::from_string("[embedding]\noptimizer = \"adam\"\nlr = 0.002\n", "t.toml");
  EXPECT_DOUBLE_EQ(c.get_double("embedding.lr"), 0.002);
  Config d = Config::from_string("[embedding]\noptimizer = \"adam\"\n", "t.toml");
  EXPECT_DOUBLE_EQ(d.get_double("embedding.lr"), 0.001);  // adam's, as torch.optim's
  // same: the dense rule's own values.
  Config e = Config::from_string("[optimizer]\nname = \"adagrad\"\n", "t.toml");
  EXPECT_DOUBLE_EQ(e.get_double("embedding.eps"), 1e-10);
}

}  // namespace
}  // namespace pshard
