// Where the fields of the SMA's attributes sit (IBA 14.2.5), relative to
// the attribute's data (MAD byte 64): shared by the device port's SMA
// (mad/sma.cc) and the agents of the other nodes of a subnet
// (mad/subnet_sma.cc).
#pragma once

#include "mad/mad_layout.h"

namespace softverbs::mad {

namespace node_info {  // IBA 14.2.5.3
using BaseVersion = BeField<0, 1>;
using ClassVersion = BeField<1, 1>;
using NodeType = BeField<2, 1>;
using NumPorts = BeField<3, 1>;
using SystemImageGuid = BeField<4, 8>;
using NodeGuid = BeField<12, 8>;
using PortGuid = BeField<20, 8>;
using PartitionCap = BeField<28, 2>;
using DeviceId = BeField<30, 2>;
using Revision = BeField<32, 4>;
using LocalPortNum = BeField<36, 1>;
using VendorId = BeField<37, 3>;
}  // namespace node_info

namespace port_info {  // IBA 14.2.5.6
using MKey = BeField<0, 8>;
using GidPrefix = BeField<8, 8>;
using Lid = BeField<16, 2>;
using MasterSmLid = BeField<18, 2>;
using CapabilityMask = BeField<20, 4>;
using LocalPortNum = BeField<28, 1>;
using LinkWidthEnabled = BeField<29, 1>;
using LinkWidthSupported = BeField<30, 1>;
using LinkWidthActive = BeField<31, 1>;
using LinkSpeedSupported = Field<32, 0, 4>;
using PortState = Field<32, 4, 4>;
using PortPhysicalState = Field<33, 0, 4>;
using LinkDownDefaultState = Field<33, 4, 4>;
using Lmc = Field<34, 5, 3>;
using LinkSpeedActive = Field<35, 0, 4>;
using LinkSpeedEnabled = Field<35, 4, 4>;
using NeighborMtu = Field<36, 0, 4>;
using MasterSmSl = Field<36, 4, 4>;
using VlCap = Field<37, 0, 4>;
using VlHighLimit = BeField<38, 1>;
using VlArbHighCap = BeField<39, 1>;
using VlArbLowCap = BeField<40, 1>;
using MtuCap = Field<41, 4, 4>;
using VlStallCount = Field<42, 0, 3>;
using HoqLife = Field<42, 3, 5>;
using OperationalVls = Field<43, 0, 4>;
using PKeyViolations = BeField<46, 2>;
using GuidCap = BeField<50, 1>;
using MKeyLeasePeriod = BeField<26, 2>;
using MKeyProtectBits = Field<34, 0, 2>;
using ClientReregister = Field<51, 0, 1>;
using SubnetTimeout = Field<51, 3, 5>;
using RespTimeValue = Field<52, 3, 5>;
using LinkSpeedExtActive = Field<62, 0, 4>;
using LinkSpeedExtSupported = Field<62, 4, 4>;
using LinkSpeedExtEnabled = Field<63, 3, 5>;
}  // namespace port_info

namespace sm_info {  // IBA 14.2.5.13
using Guid = BeField<0, 8>;
using SmKey = BeField<8, 8>;
using ActCount = BeField<16, 4>;
using Priority = Field<20, 0, 4>;
using SmState = Field<20, 4, 4>;
}  // namespace sm_info

namespace switch_info {  // IBA 14.2.5.4
using LinearFdbCap = BeField<0, 2>;
using RandomFdbCap = BeField<2, 2>;
using MulticastFdbCap = BeField<4, 2>;
using LinearFdbTop = BeField<6, 2>;
using DefaultPort = BeField<8, 1>;
using DefaultMcastPrimaryPort = BeField<9, 1>;
using DefaultMcastNotPrimaryPort = BeField<10, 1>;
using LifeTimeValue = Field<11, 0, 5>;
using PortStateChange = Field<11, 5, 1>;
using LidsPerPort = BeField<12, 2>;
using PartitionEnforcementCap = BeField<14, 2>;
using EnhancedPort0 = Field<16, 4, 1>;
using MulticastFdbTop = BeField<18, 2>;
}  // namespace switch_info

}  // namespace softverbs::mad
