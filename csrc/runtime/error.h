// PJRT errors as C++ exceptions. The Python binding layer turns these into
// RuntimeError with the plugin's message intact.
#pragma once
#include <stdexcept>
#include <string>

struct PJRT_Api;
struct PJRT_Error;

namespace torch_tpu::runtime {

class PjrtError : public std::runtime_error {
 public:
  PjrtError(std::string where, std::string message, int code)
      : std::runtime_error("PJRT " + where + " failed: " + message), code_(code) {}
  int code() const { return code_; }
  bool out_of_memory() const { return code_ == 8; }  // PJRT_Error_Code_RESOURCE_EXHAUSTED

 private:
  int code_;
};

// Reads, destroys and throws `err` when non-null. `where` names the call.
void check(const PJRT_Api* api, PJRT_Error* err, const char* where);

// Same, but returns the message instead of throwing ("" when OK).
std::string take_error(const PJRT_Api* api, PJRT_Error* err);

}  // namespace torch_tpu::runtime
