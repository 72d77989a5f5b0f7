#include "train/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "train/config_file.h"

namespace sf {
namespace {

const std::array<uint32_t, 256> kCrcTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;  // Castagnoli
    t[i] = c;
  }
  return t;
}();

uint32_t masked_crc(const void* p, size_t n) {
  const uint32_t c = crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += char((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += char(v);
}

template <typename T>
void fixed(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts (x86-64, aarch64)
  s.append(b, sizeof(T));
}

void field_bytes(std::string& s, int field, const std::string& bytes) {
  varint(s, uint64_t(field) << 3 | 2);
  varint(s, bytes.size());
  s += bytes;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string event_header(double wall_time, int64_t step) {
  std::string e;
  e += char(0x09);  // 1: wall_time, double
  fixed(e, wall_time);
  e += char(0x10);  // 2: step, varint
  varint(e, uint64_t(step));
  return e;
}

uint64_t read_varint(const std::string& s, size_t& at, const std::string& where) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    SF_CHECK(at < s.size(), where, ": truncated varint");
    const uint8_t b = uint8_t(s[at++]);
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  SF_FAIL(where, ": varint too long");
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) c = kCrcTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const double t = now_seconds();
  file_ = dir / str_cat("events.out.tfevents.", int64_t(t), ".", host, ".", getpid(), ".0");
  out_.open(file_, std::ios::binary);
  SF_CHECK(out_, file_.string(), ": cannot create the TensorBoard event file");
  std::string e = event_header(t, 0);
  field_bytes(e, 3, "brain.Event:2");  // 3: file_version
  record(e);
}

void TensorBoardWriter::record(const std::string& event) {
  std::string r;
  const uint64_t len = event.size();
  fixed(r, len);
  fixed(r, masked_crc(&len, 8));
  r += event;
  fixed(r, masked_crc(event.data(), event.size()));
  out_.write(r.data(), std::streamsize(r.size()));
  out_.flush();
  SF_CHECK(out_, file_.string(), ": write failed; check free space");
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) {
  std::string v;
  field_bytes(v, 1, tag);  // Summary.Value.tag
  v += char(0x15);         // Summary.Value.simple_value, float
  fixed(v, float(value));
  std::string summary;
  field_bytes(summary, 1, v);  // Summary.value
  std::string e = event_header(now_seconds(), step);
  field_bytes(e, 5, summary);  // Event.summary
  record(e);
}

std::vector<TensorBoardScalar> read_tensorboard_scalars(const std::filesystem::path& file) {
  const std::string s = read_text_file(file, "the TensorBoard event file");
  std::vector<TensorBoardScalar> out;
  size_t at = 0;
  for (int64_t rec = 0; at < s.size(); ++rec) {
    const std::string where = str_cat(file.string(), ": record ", rec);
    SF_CHECK(at + 12 <= s.size(), where, ": truncated header");
    uint64_t len;
    uint32_t crc_len, crc_data;
    std::memcpy(&len, s.data() + at, 8);
    std::memcpy(&crc_len, s.data() + at + 8, 4);
    SF_CHECK(crc_len == masked_crc(s.data() + at, 8), where, ": bad length CRC");
    SF_CHECK(len <= s.size() - at - 16, where, ": truncated data");
    const std::string ev = s.substr(at + 12, len);
    std::memcpy(&crc_data, s.data() + at + 12 + len, 4);
    SF_CHECK(crc_data == masked_crc(ev.data(), ev.size()), where, ": bad data CRC");
    at += 16 + len;
    // Event: step (2) and summary (5) → value (1) → tag (1), simple_value (2).
    int64_t step = 0;
    for (size_t p = 0; p < ev.size();) {
      const uint64_t key = read_varint(ev, p, where);
      const int field = int(key >> 3), type = int(key & 7);
      if (type == 1) {
        p += 8;
      } else if (type == 0) {
        const uint64_t v = read_varint(ev, p, where);
        if (field == 2) step = int64_t(v);
      } else if (type == 2) {
        const uint64_t n = read_varint(ev, p, where);
        SF_CHECK(n <= ev.size() - p, where, ": truncated field");
        if (field == 5) {
          const std::string sum = ev.substr(p, n);
          for (size_t q = 0; q < sum.size();) {
            read_varint(sum, q, where);
            const uint64_t m = read_varint(sum, q, where);
            const std::string val = sum.substr(q, m);
            q += m;
            TensorBoardScalar sc{"", step, 0};
            for (size_t r = 0; r < val.size();) {
              const uint64_t k = read_varint(val, r, where);
              if ((k & 7) == 2) {
                const uint64_t tn = read_varint(val, r, where);
                if ((k >> 3) == 1) sc.tag = val.substr(r, tn);
                r += tn;
              } else if ((k & 7) == 5) {
                if ((k >> 3) == 2) std::memcpy(&sc.value, val.data() + r, 4);
                r += 4;
              } else {
                SF_FAIL(where, ": unexpected field in a summary value");
              }
            }
            out.push_back(sc);
          }
        }
        p += n;
      } else if (type == 5) {
        p += 4;
      } else {
        SF_FAIL(where, ": unexpected wire type ", type);
      }
    }
  }
  return out;
}

}  // namespace sf
