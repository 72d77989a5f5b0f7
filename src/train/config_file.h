// defines: load_config_file, read_text_file, check_readable_file — the YAML file of
// `slideformer train run.yaml`, and reading the files train/ and cli/ take with errors that name
// the path (a directory, a missing file, a FIFO are refused before reading).
#pragma once

#include <filesystem>
#include <string>

#include "train/config.h"

namespace sf {

// Sets every key of the YAML mapping in `file` (names or aliases of train_options()) on `c`.
// Errors name the file, line and key: unknown keys (with the nearest name), values of the wrong
// type or range, a key given twice, a file that is not YAML or not a mapping.
void load_config_file(TrainConfig& c, const std::filesystem::path& file);

// Throws, naming `what` and the path, unless `p` is an existing regular file that can be opened.
void check_readable_file(const std::filesystem::path& p, const std::string& what);

// The whole file, after check_readable_file.
std::string read_text_file(const std::filesystem::path& p, const std::string& what);

}  // namespace sf
