#include "runtime/error.h"

#include "pjrt_c_api.h"

namespace torch_tpu::runtime {

std::string take_error(const PJRT_Api* api, PJRT_Error* err) {
  if (err == nullptr) return {};
  PJRT_Error_Message_Args m{};
  m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  m.error = err;
  api->PJRT_Error_Message(&m);
  std::string msg(m.message, m.message_size);
  PJRT_Error_Destroy_Args d{};
  d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  d.error = err;
  api->PJRT_Error_Destroy(&d);
  return msg.empty() ? std::string("unknown PJRT error") : msg;
}

void check(const PJRT_Api* api, PJRT_Error* err, const char* where) {
  if (err == nullptr) return;
  PJRT_Error_GetCode_Args c{};
  c.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE;
  c.error = err;
  int code = -1;
  if (api->PJRT_Error_GetCode(&c) == nullptr) code = static_cast<int>(c.code);
  throw PjrtError(where, take_error(api, err), code);
}

}  // namespace torch_tpu::runtime
