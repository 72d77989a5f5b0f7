// defines: sf::parse_size — "24GiB", "24G", "24000MiB", "1.5TiB", "4096" (bytes) as a byte count,
// for the memory budgets (--gpu-memory, --host-memory).
#pragma once

#include <cstdint>
#include <string>

namespace sf {

// Binary units (K/KiB, M/MiB, G/GiB, T/TiB are all powers of 1024, as nvidia-smi and free
// count), case-insensitive, optional "B". Errors name `option` and the accepted forms.
uint64_t parse_size(const std::string& text, const std::string& option);

}  // namespace sf
