// ProcessNotifier: one DEALER to the coordinator and a ProcessEnded message per notice.
#include "common/control/process_notice.h"

#include <capnp/message.h>

#include "common/control/control.capnp.h"
#include "common/control/control_codec.h"
#include "common/transport/bounds.h"
#include "common/transport/peer_auth.h"
#include "common/util/host.h"

namespace pshard {

namespace cc = control_codec;

ProcessNotifier::ProcessNotifier(const std::string& coordinator, std::string job_token,
                                 const transport::CurveKeys& curve)
    : token_(std::move(job_token)), sock_(ctx_, zmq::socket_type::dealer) {
  sock_.set(zmq::sockopt::linger, 200);  // a notice still queued when the launch ends is not worth waiting for
  transport::bound_client(sock_, transport::kMaxControlMessageBytes);
  transport::apply_client_auth(sock_, curve, token_);
  sock_.connect(coordinator);
}

void ProcessNotifier::process_ended(NodeRole role, std::optional<uint32_t> rank, int64_t pid, const std::string& how) {
  capnp::MallocMessageBuilder b;
  auto m = b.initRoot<control::ControlMessage>().initProcessEnded();
  m.setJobToken(token_);
  m.setRole(cc::to_wire(role));
  m.setRank(rank.value_or(0));
  m.setAnyRank(!rank.has_value());
  m.setPid(pid);
  m.setHow(how);
  m.setLocality(host_locality());  // the notifier runs beside the processes it watches
  zmq::message_t frame = cc::encode(b);
  (void)sock_.send(frame, zmq::send_flags::dontwait);  // dropped when the coordinator is not there: harmless
}

}  // namespace pshard
