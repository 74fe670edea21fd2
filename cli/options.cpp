#include "cli/options.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "harness/distributed/launcher.h"
#include "harness/train/batch_shares.h"
#include "harness/train/trainer.h"
#include "common/errors.h"

namespace harness::cli {

bool parse(const std::string& usage, const Args& args, po::options_description& options,
           po::variables_map& vm, const po::positional_options_description* positional,
           const po::options_description* arguments) {
  options.add_options()("help,h", "show this help");
  const auto help_text = [&] {
    std::ostringstream os;
    os << usage << "\n\n" << options;
    return os.str();
  };
  po::options_description all;
  all.add(options);
  if (arguments) all.add(*arguments);
  try {
    auto parser = po::command_line_parser(args).options(all);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
    if (vm.count("help")) {
      std::cout << help_text() << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::required_option& e) {
    std::string name = e.get_option_name();
    while (!name.empty() && name.front() == '-') name.erase(0, 1);
    const auto* argument = arguments ? arguments->find_nothrow(name, false) : nullptr;
    if (argument) {
      std::string upper = name;
      for (auto& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
      throw InputError(fmt::format("missing {}: {}\n\n{}", upper, argument->description(), help_text()));
    }
    throw InputError(fmt::format("{}\n\n{}", e.what(), help_text()));
  } catch (const po::error& e) {
    throw InputError(fmt::format("{}\n\n{}", e.what(), help_text()));
  }
  return true;
}

std::vector<std::string> split_commas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    size_t start = 0;
    while (start <= item.size()) {
      const size_t comma = item.find(',', start);
      const std::string part = item.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!part.empty()) out.push_back(part);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

config::LoadedConfig load_config_with_overrides(const std::string& path,
                                                const std::vector<std::string>& overrides) {
  config::LoadedConfig loaded = config::load_run_config_with_overrides(path, overrides);
  note_unread_keys(loaded.config, config::override_keys(overrides));
  return loaded;
}

void note_unread_keys(const config::RunConfig& config, const std::map<std::string, std::string>& what) {
  for (const auto& note : config::unread_key_notes(config, what)) fmt::print(stderr, "note: {}\n", note);
}

int launch_ranks(const config::LoadedConfig& loaded, const std::vector<std::string>& rank_args, int nproc) {
  if (const char* w = std::getenv("WORLD_SIZE"); w && *w)
    throw InputError(fmt::format("--nproc {}: this process is already a rank of a group "
                                 "(WORLD_SIZE={}); launch it without --nproc", nproc, w));
  train::batch_shares(loaded, nproc, fmt::format("--nproc {}", nproc));
  const auto grace = std::chrono::milliseconds(int64_t(loaded.config.run.dist_timeout * 1000) + 10000);
  return distributed::launch_local(rank_args, nproc, grace);
}

}  // namespace harness::cli
