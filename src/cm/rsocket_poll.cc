// rpoll and rselect over rsockets and ordinary fds together: an rsocket is
// polled through its CQ's completion channel and its CM channel, anything
// else through poll(2) as it is.
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "cm/event_channel.h"
#include "cm/rsocket.h"
#include "cm/rsocket_dgram.h"

namespace softverbs::cm {

using namespace rsimpl;

namespace {

// The events an rsocket has now (rdma-core's rs_poll_rs).
short poll_rs(Rsocket* rs, short events) {
  std::lock_guard<std::mutex> lk(rs->mu);
  if (rs->dg != nullptr) return ds_poll_events(rs, events);
  if ((rs->state & kRsOpening) != 0) do_connect(rs);
  if ((rs->state & (kRsConnected | kRsDisconnected | kRsError)) != 0) {
    progress(rs);
    short rev = 0;
    if ((events & POLLIN) != 0 && (have_rdata(rs) || (rs->state & kRsReadable) == 0)) rev |= POLLIN;
    if ((events & POLLOUT) != 0 && can_send(rs)) rev |= POLLOUT;
    // Hang-up only once the data that came before it has been read (as TCP
    // reports POLLIN, not POLLHUP, after a FIN): rdma-core reports it at
    // once, and rstream -T a, which takes POLLHUP for an error, then fails
    // whenever the peer's disconnect overtakes its reading.
    if ((rs->state & kRsConnected) == 0) {
      if ((rs->state & kRsDisconnected) == 0) {
        rev |= POLLERR;
      } else if (!have_rdata(rs)) {
        rev |= POLLHUP;
      }
    }
    return rev;
  }
  if (rs->state == kRsListening) return (events & POLLIN) != 0 && !rs->ch->empty() ? POLLIN : 0;
  if (rs->state == kRsConnectError) return short((events & (POLLIN | POLLOUT)) | POLLERR);
  return 0;
}

int check_all(pollfd* fds, nfds_t nfds) {
  int cnt = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    Rsocket* rs = rs_lookup(fds[i].fd);
    if (rs != nullptr) {
      fds[i].revents = poll_rs(rs, fds[i].events);
    } else {
      fds[i].revents = 0;
      if (fds[i].fd >= 0) ::poll(&fds[i], 1, 0);
    }
    if (fds[i].revents != 0) ++cnt;
  }
  return cnt;
}

}  // namespace

int rs_poll(pollfd* fds, nfds_t nfds, int timeout_ms) {
  if (fds == nullptr && nfds != 0) return fail(EFAULT);
  const uint64_t start = now_us();
  // A short spin first, as rdma-core's (its polling_time): a reply often
  // lands within microseconds.
  do {
    const int n = check_all(fds, nfds);
    if (n != 0 || timeout_ms == 0) return n;
  } while (now_us() - start <= 10);

  std::vector<pollfd> rfds;
  std::vector<nfds_t> owner;
  for (;;) {
    rfds.clear();
    owner.clear();
    for (nfds_t i = 0; i < nfds; ++i) {
      Rsocket* rs = rs_lookup(fds[i].fd);
      if (rs == nullptr) {
        rfds.push_back(pollfd{fds[i].fd, fds[i].events, 0});
        owner.push_back(i);
        continue;
      }
      std::lock_guard<std::mutex> lk(rs->mu);
      if (rs->dg != nullptr) {
        ds_arm(rs, &rfds);
        owner.resize(rfds.size(), i);
        continue;
      }
      arm_cq(rs);
      rfds.push_back(pollfd{rs->ch->pub()->fd, POLLIN, 0});
      owner.push_back(i);
      if (rs->cq_ch != nullptr) {
        rfds.push_back(pollfd{rs->cq_ch->fd, POLLIN, 0});
        owner.push_back(i);
      }
    }
    // Completions that came before the CQs were armed raise no event.
    const int ready = check_all(fds, nfds);
    if (ready != 0) return ready;
    int slice = kWakeMs * 5;
    if (timeout_ms >= 0) {
      const int64_t left = int64_t(timeout_ms) - int64_t((now_us() - start) / 1000);
      if (left <= 0) return 0;
      slice = int(std::min<int64_t>(left, slice));
    }
    const int rc = ::poll(rfds.data(), rfds.size(), slice);
    if (rc < 0) return -1;
    for (size_t j = 0; j < rfds.size(); ++j) {
      if (rfds[j].revents == 0) continue;
      Rsocket* rs = rs_lookup(fds[owner[j]].fd);
      if (rs != nullptr) {
        std::lock_guard<std::mutex> lk(rs->mu);
        if (rs->dg != nullptr) {
          ds_after_poll(rs, rfds[j]);
        } else {
          drain_cq_events(rs);
        }
      }
    }
  }
}

int rs_select(int nfds, fd_set* r, fd_set* w, fd_set* e, timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) return fail(EINVAL);
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (r != nullptr && FD_ISSET(fd, r)) ev |= POLLIN;
    if (w != nullptr && FD_ISSET(fd, w)) ev |= POLLOUT;
    if (e != nullptr && FD_ISSET(fd, e)) ev |= POLLERR;
    if (ev != 0) fds.push_back(pollfd{fd, ev, 0});
  }
  const int to = timeout == nullptr ? -1 : int(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000);
  const int rc = rs_poll(fds.data(), fds.size(), to);
  if (rc < 0) return rc;
  if (r != nullptr) FD_ZERO(r);
  if (w != nullptr) FD_ZERO(w);
  if (e != nullptr) FD_ZERO(e);
  int cnt = 0;
  for (const pollfd& p : fds) {
    if (r != nullptr && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && (p.events & POLLIN) != 0) {
      FD_SET(p.fd, r);
      ++cnt;
    }
    if (w != nullptr && (p.revents & (POLLOUT | POLLERR)) != 0 && (p.events & POLLOUT) != 0) {
      FD_SET(p.fd, w);
      ++cnt;
    }
    if (e != nullptr && (p.revents & ~(POLLIN | POLLOUT)) != 0 && (p.events & POLLERR) != 0) {
      FD_SET(p.fd, e);
      ++cnt;
    }
  }
  return cnt;
}

}  // namespace softverbs::cm
