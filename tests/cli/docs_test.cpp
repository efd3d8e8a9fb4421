// The documentation against the code: docs/stages.md is what `gen3d stages --markdown` prints, and
// every relative link in README.md and docs/*.md leads to a file that exists (and, with a
// #fragment, to a heading of that file).

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The Markdown pages: README.md and docs/*.md.
std::vector<fs::path> markdown_pages() {
  std::vector<fs::path> pages = {fs::path(source_dir()) / "README.md"};
  for (const auto& entry : fs::directory_iterator(fs::path(source_dir()) / "docs"))
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  std::sort(pages.begin(), pages.end());
  return pages;
}

// The lines of a page outside fenced code blocks, with inline code spans blanked out.
std::vector<std::string> prose_lines(const std::string& text) {
  std::vector<std::string> out;
  bool fenced = false;
  for (std::string line : lines_of(text)) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      out.emplace_back();
      continue;
    }
    if (fenced) {
      out.emplace_back();
      continue;
    }
    bool code = false;
    for (char& c : line) {
      if (c == '`') code = !code;
      if (code) c = ' ';
    }
    out.push_back(line);
  }
  return out;
}

// GitHub's anchor for a heading: lower case, punctuation other than '-' and '_' dropped, spaces
// as '-'; a repeated heading gets -1, -2, ...
std::set<std::string> anchors_of(const std::string& text) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  bool fenced = false;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || line.empty() || line[0] != '#') continue;
    const auto start = line.find_first_not_of('#');
    if (start == std::string::npos || line[start] != ' ') continue;
    std::string slug;
    for (const char c : line.substr(start + 1)) {
      const auto u = static_cast<unsigned char>(c);
      if (std::isalnum(u) || c == '-' || c == '_')
        slug += static_cast<char>(std::tolower(u));
      else if (c == ' ')
        slug += '-';
    }
    const int n = seen[slug]++;
    anchors.insert(n == 0 ? slug : slug + "-" + std::to_string(n));
  }
  return anchors;
}

TEST(Docs, StagesPageIsTheBinarysOutput) {
  const auto r = run_gen3d("stages --markdown 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path page = fs::path(source_dir()) / "docs" / "stages.md";
  ASSERT_TRUE(fs::is_regular_file(page)) << page;
  const std::vector<std::string> want = lines_of(r.output);
  const std::vector<std::string> have = lines_of(read_text(page));
  size_t line = 0;
  while (line < want.size() && line < have.size() && want[line] == have[line]) ++line;
  if (line == want.size() && line == have.size()) return;
  ADD_FAILURE() << "docs/stages.md differs from `gen3d stages --markdown` at line " << line + 1
                << ":\n  docs/stages.md: " << (line < have.size() ? have[line] : "(end)")
                << "\n  gen3d:          " << (line < want.size() ? want[line] : "(end)")
                << "\nRegenerate it: build/gen3d stages --markdown > docs/stages.md";
}

TEST(Docs, RelativeLinksLeadToFilesAndHeadings) {
  const std::regex link(R"(\]\(([^)\s]+)\))");
  int checked = 0;
  for (const fs::path& page : markdown_pages()) {
    const std::string text = read_text(page);
    const std::vector<std::string> lines = prose_lines(text);
    for (size_t i = 0; i < lines.size(); ++i) {
      for (std::sregex_iterator m(lines[i].begin(), lines[i].end(), link), end; m != end; ++m) {
        const std::string target = (*m)[1];
        if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
        const auto hash = target.find('#');
        const std::string file = target.substr(0, hash);
        const std::string fragment = hash == std::string::npos ? "" : target.substr(hash + 1);
        const std::string where = page.filename().string() + ":" + std::to_string(i + 1) + ": ";
        const fs::path resolved = file.empty() ? page : page.parent_path() / file;
        ++checked;
        if (!fs::exists(resolved)) {
          ADD_FAILURE() << where << target << ": no such file";
          continue;
        }
        if (!fragment.empty() && resolved.extension() == ".md" &&
            !anchors_of(read_text(resolved)).count(fragment))
          ADD_FAILURE() << where << target << ": no heading with that anchor";
      }
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace gen3d::test
