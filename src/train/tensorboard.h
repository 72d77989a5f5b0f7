// defines: sf::TensorBoardWriter, read_tensorboard_scalars — TensorBoard event files
// (`report_to: tensorboard`): TFRecord framing (length, masked CRC-32C of the length, an Event
// protobuf, masked CRC-32C of it) with Event{wall_time, step, summary{value{tag, simple_value}}},
// written by hand (no protobuf library); TensorBoard and tensorboardX read them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sf {

class TensorBoardWriter {
 public:
  // Creates dir and events.out.tfevents.<seconds>.<host>.<pid>.0 in it.
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  void scalar(const std::string& tag, int64_t step, double value);
  const std::filesystem::path& file() const { return file_; }

 private:
  void record(const std::string& event);
  std::filesystem::path file_;
  std::ofstream out_;
};

struct TensorBoardScalar {
  std::string tag;
  int64_t step;
  float value;
};

// Every scalar of an event file written as above; throws naming the file and the record on a bad
// length or CRC (for tests and tools).
std::vector<TensorBoardScalar> read_tensorboard_scalars(const std::filesystem::path& file);

uint32_t crc32c(const void* data, size_t n);

}  // namespace sf
