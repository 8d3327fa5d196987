// The PJRT client handle shared by every object it created. Buffers and
// executables hold a reference, so the client is destroyed only after them.
#pragma once
#include <memory>

#include "pjrt_c_api.h"

namespace torch_tpu::runtime {

struct ClientCore {
  const PJRT_Api* api = nullptr;
  PJRT_Client* client = nullptr;
  ~ClientCore();
};
using ClientRef = std::shared_ptr<ClientCore>;

}  // namespace torch_tpu::runtime
