// The documents generated from stage contracts: the Markdown page of `gen3d stages --markdown`.

#include "pipeline/describe.h"

#include <string>

#include <gtest/gtest.h>

#include "test_stages.h"

namespace gen3d::test {
namespace {

using pipeline::StageContext;
using pipeline::StageContract;

// A stage whose docs hold every character Markdown would read as markup.
class MarkupDocs final : public pipeline::Stage {
 public:
  StageContract contract() const override {
    return StageContract("test_markup", "Writes <dir>/<name>.png; keys like unet.* and a_b stay.")
        .model_class()
        .reads_files("path", true)
        .input<Number>("x", "rows [a | b]")
        .optional_input<Text>("label")
        .output<Number>("y", "x * 2, the `_private` field")
        .required<std::string>("path", "a file")
        .choice("mode", "fast", {"fast", "exact"}, "fast | exact")
        .param<int>("size", 64, {16, 4096}, "_leading underscore_");
  }
  void run(StageContext&) const override {}
};

std::string markdown() {
  pipeline::Registry registry;
  registry.add<MarkupDocs>();
  return pipeline::stages_markdown(registry);
}

TEST(Describe, MarkdownHasIndexPortTypesAndOneSectionPerStage) {
  const std::string md = markdown();
  EXPECT_EQ(md.rfind("# Stage reference\n", 0), 0u) << md;
  EXPECT_NE(md.find("| [test_markup](#test_markup) (model) | Writes &lt;dir>/&lt;name>.png;"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| `Number` | [test_markup](#test_markup) | [test_markup](#test_markup) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("\n## test_markup\n"), std::string::npos) << md;
  EXPECT_NE(md.find("Files read (their content is part of the cache key): `path` (with the files "
                    "beside it)."),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("\n\n\n"), std::string::npos) << "no double blank lines\n" << md;
  EXPECT_TRUE(md.ends_with("|\n") && !md.ends_with("\n\n")) << md;
}

TEST(Describe, MarkdownEscapesMarkupOutsideCodeSpans) {
  const std::string md = markdown();
  EXPECT_NE(md.find("keys like unet.\\* and a_b stay."), std::string::npos) << md;
  EXPECT_NE(md.find("| `x` | `Number` | rows [a \\| b] |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `label` | `Text` | optional |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `y` | `Number` | x \\* 2, the `_private` field |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `path` | string | required | a file |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `mode` | one of `fast`, `exact` | `\"fast\"` | fast \\| exact |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| `size` | integer 16..4096 | `64` | \\_leading underscore\\_ |"),
            std::string::npos)
      << md;
}

}  // namespace
}  // namespace gen3d::test
