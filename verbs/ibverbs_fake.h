// Copyright dreplay authors.
//
// ibverbs_fake.h: a strict fake device behind the IbvApi seam
// (ibverbs_api.h), for unit tests of the provider's queue-pair logic
// without hardware. It refuses what a NIC and the kernel refuse, with the
// errno or completion they give, and keeps the accounting a NIC keeps.
//
// Device profiles (DeviceProfile): the fake plays one device, mlx5
// (ConnectX), rxe on Linux >= 6.0, rxe before 5.14 or siw, with that
// device's limits and what it cannot do. The default is mlx5, which can do
// everything the protocol needs; every other rule below holds on each
// profile. Describe() fills a Device (ibverbs_device.h) as OpenDevice
// would on that device, so code under test sees what the fake enforces.
//
//  * CreateQp: max_send_wr / max_recv_wr above the profile's max_qp_wr,
//    max_send_sge above its max_send_sge, or max_inline_data above its
//    inline limit is EINVAL.
//  * QP states RESET -> INIT -> RTR -> RTS, any -> ERR: a transition not in
//    that list, or a mask missing an attribute the kernel requires for RC
//    (ibverbs_attributes.h lists them) or naming one it does not allow, is
//    EINVAL. The values are checked too: port 1 only; a path MTU above the
//    profile's active MTU; max_dest_rd_atomic above max_qp_rd_atom;
//    max_rd_atomic above max_qp_init_rd_atom; on RoCE, an address vector
//    without a GRH or a source GID index outside the GID table: EINVAL. A
//    GID index inside the table whose entry is empty is ENODATA (the
//    kernel's rdma_get_gid_attr).
//  * Send queue: posting needs RTS (or ERR, where requests are flushed);
//    more than max_send_wr WQEs outstanding is ENOMEM and stops at the bad
//    request (*bad); num_sge above max_send_sge, or IBV_SEND_INLINE above
//    max_inline_data, is EINVAL. An opcode the profile cannot do (atomics,
//    WRITE_WITH_IMM or BIND_MW on siw, BIND_MW on rxe before 5.14) is
//    refused at the post, as the user-space provider refuses it; siw's
//    errors come back negative (-EINVAL), as libsiw returns them. A window
//    bind longer than the profile's window limit is EOPNOTSUPP (mlx5: over
//    2^31 bytes). Every other request executes at once and succeeds; a
//    signalled one adds a completion, and a WQE is freed only when a
//    completion at or after it is polled (selective signalling, as on
//    hardware).
//  * A WRITE or READ longer than the port's max_msg_sz completes with
//    IBV_WC_LOC_LEN_ERR (whether signalled or not) and moves the QP to ERR.
//  * An atomic whose remote address is not 8-byte aligned completes with
//    IBV_WC_REM_INV_REQ_ERR (whether signalled or not) and moves the QP to
//    ERR.
//  * In ERR every outstanding send request (a WQE that no queued
//    completion covers yet: hardware may not have run it) completes with
//    IBV_WC_WR_FLUSH_ERR, in posting order, signalled or not; so does every
//    posted receive, and so do later posts.
//  * InjectSendError makes the next send request posted to a QP complete
//    with a given error status (a remote access error, say), as a peer or
//    the link would, moving the QP to ERR.
//  * Memory windows: AllocMw makes type-1 or type-2 windows (a key index in
//    the upper 24 bits); it fails with EOPNOTSUPP on a profile without
//    windows, and with the profile's errno past its max_mw windows (EINVAL
//    on rxe). An IBV_WR_BIND_MW request must name a type-2 window not bound
//    yet, a new key with the window's index and another low byte
//    (ibv_inc_rkey), a region made by RegisterMr with IBV_ACCESS_MW_BIND, a
//    range inside it and, for remote write, a region with local write;
//    otherwise it completes with IBV_WC_MW_BIND_ERR and moves the QP to ERR.
//    A bound window admits (WindowAllows) requests that arrive on its own
//    QP only. Destroying a QP with windows still bound through it, or
//    deregistering (DeregMr) a region with a window bound to it, is a
//    lifetime violation: recorded (violations()), as rxe makes the first a
//    use-after-free and every device refuses the second (EBUSY here).
//  * The CQ holds `cqe` completions; one more is an overrun (recorded, the
//    completion dropped), which the tests check never happens.
//
// Not thread-safe: one test thread drives it.

#ifndef DREPLAY_VERBS_IBVERBS_FAKE_H_
#define DREPLAY_VERBS_IBVERBS_FAKE_H_

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "verbs/ibverbs_api.h"
#include "verbs/ibverbs_device.h"

namespace dreplay::verbs::ibverbs {

class StrictFakeIbv : public IbvApi {
 public:
  // What one kind of device can do, as the fake enforces it. The factories
  // give the real values, with the driver constant each comes from (see
  // ibverbs_fake.cc); a test may change a copy.
  struct DeviceProfile {
    // One entry of the port's GID table.
    enum class Gid { kEmpty, kRoceV1, kRoceV2, kIwarp };

    std::string name;
    ibv_transport_type transport = IBV_TRANSPORT_IB;  // IB for InfiniBand and RoCE
    ibv_atomic_cap atomic_cap = IBV_ATOMIC_HCA;
    int max_qp_wr = 0;
    int max_send_sge = 0;
    uint32_t max_inline_data = 0;
    int max_qp_rd_atom = 0;           // responder depth: the limit of max_dest_rd_atomic
    int max_qp_init_rd_atom = 0;      // initiator depth: the limit of max_rd_atomic
    int max_mw = 0;                   // 0: no memory windows at all
    int mw_exhausted_errno = ENOMEM;  // AllocMw's errno past max_mw windows
    ibv_mtu active_mtu = IBV_MTU_1024;
    uint32_t max_msg_sz = 0;            // the port's largest message, bytes
    uint64_t max_window_length = 0;     // 0: no limit but the region's
    bool write_with_imm = true;         // RDMA WRITE with immediate
    bool negative_post_errors = false;  // ibv_post_send returns -errno
    std::vector<Gid> gid_table;         // gid_tbl_len entries

    // ConnectX-4 and later (mlx5), RoCE on a 1500-byte Ethernet MTU.
    static DeviceProfile Mlx5();
    // Soft-RoCE (rdma_rxe) on Linux >= 6.0, on a 1500-byte MTU netdev.
    static DeviceProfile Rxe();
    // Soft-RoCE before Linux 5.14: no memory windows.
    static DeviceProfile RxeBefore514();
    // Soft-iWARP (siw): no windows, no atomics, no WRITE_WITH_IMM.
    static DeviceProfile Siw();

    bool memory_windows() const { return max_mw > 0; }
    bool atomics() const { return atomic_cap != IBV_ATOMIC_NONE; }
    bool roce() const { return transport == IBV_TRANSPORT_IB; }
    // Fills device->attr and device->port_attr as ibv_query_device and
    // ibv_query_port would on this device (port 1, Ethernet link layer).
    void Describe(Device* device) const;
  };

  struct QpConfig {
    int max_send_wr = 16;
    int max_recv_wr = 16;
    int max_send_sge = 1;
    uint32_t max_inline_data = 64;
    int cqe = 32;
  };

  // The default profile is DeviceProfile::Mlx5().
  StrictFakeIbv();
  explicit StrictFakeIbv(DeviceProfile profile);
  ~StrictFakeIbv() override;
  StrictFakeIbv(const StrictFakeIbv&) = delete;
  StrictFakeIbv& operator=(const StrictFakeIbv&) = delete;

  const DeviceProfile& profile() const { return profile_; }

  // A QP in RESET and its CQ, owned by the fake until DestroyQp/DestroyCq
  // (or the fake's destruction): 0, or EINVAL (nothing made) when `config`
  // is beyond the profile's limits.
  int CreateQp(const QpConfig& config, ibv_qp** qp, ibv_cq** cq);

  // IbvApi.
  int ModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) override;
  int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) override;
  int PostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) override;
  int PollCq(ibv_cq* cq, int entries, ibv_wc* wc) override;
  int DestroyQp(ibv_qp* qp) override;
  int DestroyCq(ibv_cq* cq) override;
  ibv_mw* AllocMw(ibv_pd* pd, ibv_mw_type type) override;
  int DeallocMw(ibv_mw* mw) override;
  int DeregMr(ibv_mr* mr) override;

  // A memory region as ibv_reg_mr would make it, owned by the fake.
  ibv_mr* RegisterMr(void* addr, size_t length, int access);
  // True when a request arriving on `qp` with `rkey` for [addr, addr +
  // length) and `access` (IBV_ACCESS_REMOTE_*) passes a bound window.
  bool WindowAllows(const ibv_qp* qp, uint32_t rkey, uint64_t addr, uint64_t length,
                    int access) const;
  int windows_allocated() const { return static_cast<int>(mws_.size()); }
  // The lifetime rules broken so far, one line each (empty: none).
  const std::vector<std::string>& violations() const { return violations_; }

  // The next send request posted to `qp` completes with `status` (not
  // IBV_WC_SUCCESS), signalled or not, and the QP moves to ERR.
  void InjectSendError(const ibv_qp* qp, ibv_wc_status status);

  // What tests check.
  ibv_qp_state state(const ibv_qp* qp) const;
  int outstanding_sends(const ibv_qp* qp) const;  // WQEs not yet freed
  int completions_queued(const ibv_cq* cq) const;
  bool cq_overrun(const ibv_cq* cq) const;
  // The attributes of the last accepted transition to `state`.
  const ibv_qp_attr& attr_for(const ibv_qp* qp, ibv_qp_state state) const;
  // Every send request the fake accepted, in order (flags included).
  const std::deque<ibv_send_wr>& accepted_sends(const ibv_qp* qp) const;

 private:
  // A queued completion; a send's frees its QP's WQEs up to `seq` when
  // polled.
  struct Entry {
    ibv_wc wc = {};
    const ibv_qp* qp = nullptr;
    bool send = false;
    uint64_t seq = 0;
  };
  struct FakeCq {
    std::unique_ptr<ibv_cq> cq;
    int capacity = 0;
    std::deque<Entry> entries;
    bool overrun = false;
  };
  struct Wqe {
    uint64_t seq = 0;
    uint64_t wr_id = 0;
    ibv_wc_opcode opcode = IBV_WC_RDMA_WRITE;
  };
  struct FakeQp {
    std::unique_ptr<ibv_qp> qp;
    QpConfig config;
    ibv_cq* cq = nullptr;
    ibv_qp_state state = IBV_QPS_RESET;
    std::map<ibv_qp_state, ibv_qp_attr> attrs;  // by target state
    std::deque<Wqe> sends;                      // WQEs not yet freed, by seq
    uint64_t next_seq = 0;
    uint64_t completed_before = 0;  // WQEs below this seq have a completion
    std::deque<uint64_t> recvs;     // posted receives' wr_ids
    std::deque<ibv_send_wr> accepted;
    ibv_wc_status inject = IBV_WC_SUCCESS;  // for the next send request
  };

  FakeQp& Qp(const ibv_qp* qp);
  const FakeQp& Qp(const ibv_qp* qp) const;
  FakeCq& Cq(const ibv_cq* cq);
  void Push(FakeQp& qp, const Entry& entry);
  // Queues a send completion of `qp` for WQE `seq`.
  void PushSend(FakeQp& qp, uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode,
                uint64_t seq);
  // The errno ibv_modify_qp gives for attribute values beyond the profile
  // (0: none).
  int CheckValues(const ibv_qp_attr& attr, int mask) const;
  // The errno ibv_post_send gives for `wr` on `qp` before it reaches the
  // send queue (0: accepted), in the profile's sign.
  int CheckPost(const FakeQp& qp, const ibv_send_wr& wr) const;
  // The completion status of accepted request `wr` on `qp`.
  ibv_wc_status Execute(ibv_qp* qp, const ibv_send_wr& wr);
  // A completion of `qp` with `status` for `wr_id`.
  static Entry MakeEntry(const FakeQp& qp, uint64_t wr_id, ibv_wc_status status,
                         ibv_wc_opcode opcode, bool send, uint64_t seq);
  // Moves `qp` to ERR and queues flush completions for what is outstanding.
  void EnterError(FakeQp& qp);

  struct FakeMw {
    std::unique_ptr<ibv_mw> mw;
    const ibv_qp* bound_qp = nullptr;  // null: not bound
    const ibv_mr* region = nullptr;    // what it is bound over
    uint32_t rkey = 0;                 // the bound key
    uint64_t addr = 0;
    uint64_t length = 0;
    int access = 0;
  };
  struct FakeMr {
    std::unique_ptr<ibv_mr> mr;
    int access = 0;
  };
  // The completion status of bind request `wr` on `qp` (success binds it).
  ibv_wc_status Bind(const ibv_qp* qp, const ibv_send_wr& wr);

  const DeviceProfile profile_;
  uint32_t next_qpn_ = 0x100;
  uint32_t next_mw_index_ = 1;
  std::map<const ibv_mw*, FakeMw> mws_;
  std::map<const ibv_mr*, FakeMr> mrs_;
  std::map<const ibv_qp*, FakeQp> qps_;
  std::map<const ibv_cq*, FakeCq> cqs_;
  std::vector<std::string> violations_;
};

}  // namespace dreplay::verbs::ibverbs

#endif  // DREPLAY_VERBS_IBVERBS_FAKE_H_
