"""Deterministic generator of large synthetic work-order corpora with known duplicate clusters.

    python -m sample_data.generate --rows N --out DIR [--seed S] [--format csv|parquet]
                                   [--shards K]

Records are Chinese (about 70 %) and English CNC maintenance work orders assembled from
template banks (opener, symptom, alarm, observation, cause, evidence, action, verification,
prevention, remark) with per-record numbers, axes, parameters, part numbers and alarm codes
of the machine's controller family, in five layouts (four structured columns, three, symptom
and action only, free text with cue words in the symptom column, fault-log style).
80-600 characters of text per record.

Ground truth:
- about 30 % of records belong to near-duplicate clusters of 2-6 members: one original
  plus copies with exact duplication, a changed date/technician, inserted or deleted
  characters, punctuation, whitespace, a reworded verification tail, or a full-width alarm
  code (1-2 edits each);
- hard negatives (about 3 %): copies of a singleton that differ only in the alarm code, or
  only in the machine; each has its own cluster id.
`cluster_id` is equal within a cluster and unique otherwise. Everything is numpy/polars
vectorized: a million rows take seconds.

Written to disk: shards `part-00000.csv|parquet` ... and `clusters.parquet`
(position, order_id, cluster_id, shard, shard_row, edit, negative_of). CSV shards use the
headers of real exports, cycling over: Chinese headers in GBK with CRLF, English headers in
UTF-8 with BOM, Chinese variant headers (故障描述/维修措施/预防建议) in UTF-8.
Parquet shards use the record field names of `schemas.records.WORKORDER_FIELDS`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from schemas.records import WORKORDER_FIELDS

FIELDS = WORKORDER_FIELDS
MIN_CHARS = 80
MAX_CHARS = 600
CLUSTER_SHARE = 0.30
CODE_NEGATIVE_SHARE = 0.02
MACHINE_NEGATIVE_SHARE = 0.01

HEADERS: tuple[tuple[str, ...], ...] = (
    ("工单号", "设备编号", "机床型号", "报修时间", "故障现象", "原因分析", "处理措施", "预防措施",
     "维修人员", "状态", "备注"),
    ("Order No", "Asset", "Machine Model", "Reported At", "Problem Description", "Cause",
     "Corrective Action", "Preventive Action", "Technician", "Status", "Remarks"),
    ("工单编号", "设备编号", "机床型号", "报修日期", "故障描述", "故障原因", "维修措施", "预防建议",
     "维修人", "状态", "备注"),
)  # fmt: skip
# (encoding, line terminator) per header style; shard i uses style i % 3.
ENCODINGS: tuple[tuple[str, str], ...] = (("gbk", "\r\n"), ("utf-8-sig", "\n"), ("utf-8", "\n"))

# ---------------------------------------------------------------- machines and codes
# (model, asset prefix, controller family)
MACHINES: tuple[tuple[str, str, str], ...] = (
    ("VMC850（FANUC 0i-MF）", "CNC", "fanuc"),
    ("沈阳机床 VMC850E（FANUC 0i-MF）", "SY", "fanuc"),
    ("大连机床 CKA6150（FANUC 0i-TF）", "DL", "fanuc"),
    ("牧野 a61nx（FANUC 31i-B）", "MK", "fanuc"),
    ("FANUC Robodrill α-D21MiB5（31i-B）", "RD", "fanuc"),
    ("VMC850（FANUC 0i-MC）", "OLD", "fanuc_old"),
    ("大连机床 VDL-600A（FANUC 0i-MC）", "DL", "fanuc_old"),
    ("沈阳机床 VMC0850B（SINUMERIK 828D）", "SY", "sinumerik"),
    ("宝鸡机床 CK7525（SINUMERIK 828D）", "BJ", "sinumerik"),
    ("DMG MORI DMU 65 monoBLOCK（SINUMERIK 840D sl）", "DMG", "sinumerik"),
    ("济二 XK2425 龙门（SINUMERIK 840D sl）", "JR", "sinumerik"),
    ("友嘉 FV-1000A（三菱 M80）", "FF", "mitsubishi"),
    ("台中精机 Vcenter-85（三菱 M80）", "VC", "mitsubishi"),
    ("DMG MORI DMU 50（Heidenhain TNC 640）", "DMG", "heidenhain"),
    ("DMG MORI CMX 1100 V（Heidenhain TNC 640）", "DMG", "heidenhain"),
    ("Haas VF-2", "HAAS", "haas"),
    ("Haas ST-20", "HAAS", "haas"),
    ("Mazak VCN-530C（Mazatrol SmoothG）", "MZ", "mazak"),
    ("Mazak QTE-200（Mazatrol SmoothG）", "MZ", "mazak"),
)
FAMILIES: tuple[str, ...] = (
    "fanuc", "fanuc_old", "sinumerik", "mitsubishi", "heidenhain", "haas", "mazak",
)  # fmt: skip
GROUPS: tuple[str, ...] = ("axis", "spindle", "plc")
# family -> group -> alarm codes as the controller shows them
CODES: dict[str, dict[str, tuple[str, ...]]] = {
    "fanuc": {
        "axis": ("SV0401", "SV0410", "SV0411", "SV0436", "SV0368", "SV0301", "SV0433",
                 "OT0500", "OT0501", "PS0090", "DS0300", "SV0379"),
        "spindle": ("SP9001", "SP9002", "SP9031", "SP9012", "SP9073", "SP1241"),
        "plc": ("EX1001", "EX1002", "EX1010", "EX1025", "EX2005", "EX1104"),
    },
    "fanuc_old": {
        "axis": ("ALM 414", "ALM 401", "ALM 410", "ALM 411", "ALM 436"),
        "spindle": ("ALM 751", "ALM 749", "ALM 409"),
        "plc": ("ALM 1001", "ALM 1002", "ALM 1010"),
    },
    "sinumerik": {
        "axis": ("25000", "25040", "25050", "25201", "21612", "25080", "25020"),
        "spindle": ("207016", "207011", "207900", "22050", "207410"),
        "plc": ("700016", "700017", "700045", "700102", "700203", "700120"),
    },
    "mitsubishi": {
        "axis": ("S01 0052", "S02 0037", "Y03 0001", "S01 0032", "S03 0017"),
        "spindle": ("S01 0046", "S01 0031", "S01 0024"),
        "plc": ("M01 0004", "M01 0007", "Y02 0001"),
    },
    "heidenhain": {
        "axis": ("8B40", "8A30", "8040", "8B20"),
        "spindle": ("8B30", "8720", "8730"),
        "plc": ("8510", "8150", "8190"),
    },
    "haas": {
        "axis": ("Alarm 108", "Alarm 103", "Alarm 161", "Alarm 145", "Alarm 109"),
        "spindle": ("Alarm 123", "Alarm 160", "Alarm 102"),
        "plc": ("Alarm 157", "Alarm 171", "Alarm 2002"),
    },
    "mazak": {"axis": ("",), "spindle": ("",), "plc": ("",)},
}  # fmt: skip
PARAMS: dict[str, tuple[str, ...]] = {
    "fanuc": ("1825", "1826", "1828", "1829", "2021", "1815#4", "4077", "1320"),
    "fanuc_old": ("1825", "1828", "1829", "2021", "1815"),
    "sinumerik": ("MD36030", "MD36400", "MD32200", "MD32300", "MD36060", "MD34100"),
    "mitsubishi": ("#2203", "#2224", "#2205", "#2213"),
    "heidenhain": ("MP2020", "MP1054", "MP1410", "MP2420"),
    "haas": ("Setting 7", "Setting 52", "Parameter 57", "Parameter 76"),
    "mazak": ("#3401", "#3402", "SV 18", "SV 20"),
}
PARTS: tuple[str, ...] = (
    "A06B-6117-H105", "A06B-6240-H105", "A06B-0235-B400", "A860-2000-T301", "A90L-0001-0538/R",
    "A98L-0031-0012", "6SL3120-1TE21-0AA3", "6SL3120-1TE23-0AA3", "1FK7063-5AF71",
    "MDS-D2-V1-80", "HG204S", "LC 483", "ERN 1387", "7204 P4 DF", "7014C P4", "THK SHS25",
    "32-5680", "93-1000", "SMC SY5120", "Rexroth 4WE6",
)  # fmt: skip
TECH_ZH: tuple[str, ...] = (
    "张伟", "李强", "王磊", "刘洋", "陈浩", "赵敏", "孙涛", "周杰", "吴昊", "郑凯", "王建国",
    "李娜",
    "黄勇", "杨帆", "徐明", "马超", "朱军", "胡斌", "郭亮", "何平", "高峰", "林涛", "罗鹏", "梁伟",
)  # fmt: skip
TECH_EN: tuple[str, ...] = (
    "Mike Turner", "Laura Chen", "Dave Wilson", "Raj Patel", "John Miller", "Sarah Lee",
    "Tom Becker", "Anna Novak", "Chris Young", "Maria Lopez", "Kevin Brown", "Emma Davis",
)  # fmt: skip
STATUS_ZH: tuple[str, ...] = ("已完成", "已完成", "已完成", "已关闭", "待观察", "待料")
STATUS_EN: tuple[str, ...] = ("Closed", "Closed", "Closed", "Completed", "Monitor", "Waiting parts")

# ---------------------------------------------------------------- text banks
# Placeholders: {axis} {n} {h} {t} {mm} {part} {param} {code} {date} {tech} {phone}
# Category: (group, zh (symptom, cause, action, prevention), en (...)).
# Chinese pieces carry no final punctuation; English symptom pieces start lower case.
CATEGORIES: tuple[tuple[str, tuple, tuple], ...] = (
    ("axis", (
        ("{axis}轴快速移动时伺服报警，机床停止", "{axis}轴运行中突然停止并报伺服未准备好",
         "{axis}轴移动时有异常抖动，伺服电机发热", "{axis}轴使能后马上报警，无法移动"),
        ("{axis}轴伺服放大器{part}内部功率模块损坏",
         "{axis}轴电机动力线在拖链内磨破，对地绝缘只有{n}MΩ",
         "{axis}轴导轨润滑不足，阻力增大导致伺服过载",
         "{axis}轴电机编码器反馈线屏蔽层断开，受到干扰"),
        ("更换{axis}轴伺服放大器{part}，核对参数{param}", "更换{axis}轴动力电缆并重新整理拖链",
         "疏通{axis}轴润滑油路，清洗导轨滑块", "重新制作编码器电缆屏蔽接地，紧固插头"),
        ("拖链电缆定期检查磨损", "电柜清洁和放大器风扇检查", "导轨润滑油量和油路通畅性点检"),
    ), (
        ("{axis} axis servo alarm during rapid traverse, machine stops",
         "{axis} axis stops suddenly in cycle with servo not ready",
         "{axis} axis shakes while moving and the servo motor runs hot",
         "{axis} axis alarms right after servo enable and will not move"),
        ("power module inside the {axis} axis amplifier {part} failed",
         "{axis} motor power cable chafed inside the cable carrier, insulation down to {n} MOhm",
         "{axis} way lube starved, friction raised the servo load",
         "shield of the {axis} encoder feedback cable broken, picking up noise"),
        ("replaced the {axis} amplifier {part} and checked parameter {param}",
         "replaced the {axis} motor power cable and re-dressed the cable carrier",
         "flushed the {axis} lube lines and cleaned the guide blocks",
         "re-terminated the encoder cable shield to ground and tightened the plugs"),
        ("inspect cable carriers for wear", "clean the cabinet and check the amplifier fans",
         "check way lube flow and metering units"),
    )),
    ("spindle", (
        ("主轴运转约{h}小时后报过热", "主轴升速到{n}00rpm时报警停机", "主轴负载偏高，重切削时报警",
         "主轴电机温度高，外壳烫手"),
        ("主轴电机冷却风扇{part}停转", "主轴电机风扇滤网被油雾堵塞", "主轴同步带张紧不足且有裂纹",
         "主轴冷却机制冷不足，油温达到{t}℃"),
        ("更换主轴电机风扇，清理散热片", "清洗风扇滤网并吹扫电机", "更换主轴同步带并按规定张紧",
         "清理冷却机冷凝器，补充冷却油"),
        ("主轴风扇和滤网点检", "主轴皮带张力检查", "主轴冷却机冷凝器清洁"),
    ), (
        ("spindle overheats after about {h} h of running", "spindle alarms and stops at {n}00 rpm",
         "spindle load is high and alarms in heavy cuts",
         "spindle motor housing is too hot to touch"),
        ("spindle motor fan {part} not turning", "spindle motor fan filter clogged with oil mist",
         "spindle belt loose and cracked", "spindle chiller not cooling, oil at {t} C"),
        ("replaced the spindle motor fan and cleaned the fins",
         "cleaned the fan filter and blew out the motor",
         "replaced the spindle belt and set the tension to spec",
         "cleaned the chiller condenser and topped up the coolant oil"),
        ("check spindle fan and filter", "check spindle belt tension", "clean chiller condenser"),
    )),
    ("spindle", (
        ("主轴高速旋转时有异响", "主轴运转声音异常，加工表面有振纹", "主轴径向跳动超差，孔径不圆",
         "主轴停止时有“咔咔”声"),
        ("主轴前轴承{part}磨损，跳动达到{mm}mm", "主轴轴承润滑脂老化",
         "主轴拉刀碟簧断裂，刀柄夹持不稳",
         "主轴锥孔有磕伤，刀柄定位不准"),
        ("返厂修复主轴并更换前后轴承", "更换主轴轴承并重新预紧", "更换拉刀碟簧组，测量拉刀力合格",
         "修磨主轴锥孔，重新检测跳动"),
        ("主轴振动检测", "主轴拉刀力检测", "刀柄清洁和锥孔检查"),
    ), (
        ("spindle noisy at high speed", "spindle sounds rough and parts show chatter",
         "spindle runout out of tolerance, bores not round", "spindle clicks when it stops"),
        ("front spindle bearing {part} worn, runout {mm} mm",
         "spindle bearing grease degraded", "drawbar disc springs broken, tool not held firmly",
         "spindle taper damaged, tool holders do not seat"),
        ("sent the spindle for rebuild and replaced the bearings",
         "replaced the spindle bearings and set the preload",
         "replaced the drawbar spring stack, pull force measured ok",
         "reground the spindle taper and rechecked runout"),
        ("run a spindle vibration check", "measure drawbar pull force",
         "clean tool holders and inspect the taper"),
    )),
    ("plc", (
        ("换刀时机械手停在中间位置", "刀库旋转不到位，换刀超时", "换刀时刀柄撞刀库刀爪",
         "刀库计数错乱，调刀号与实际不符"),
        ("刀库定位接近开关被切屑覆盖，信号时有时无", "主轴定向参数{param}被误改",
         "机械手到位开关松动，信号抖动",
         "刀库电机抱闸间隙过大"),
        ("清理并调整接近开关感应距离至{mm}mm", "恢复参数{param}原值并重新调整定向位置",
         "紧固到位开关支架，重新调整感应距离", "调整刀库电机抱闸间隙"),
        ("刀库区域切屑清理", "参数修改须经设备科确认并备份", "刀库开关支架紧固检查"),
    ), (
        ("ATC arm stops halfway during a tool change", "tool magazine does not index, ATC timeout",
         "tool holder hits the magazine pocket during tool change",
         "magazine pocket count wrong, called tool does not match"),
        ("magazine proximity switch covered with chips, signal intermittent",
         "spindle orientation parameter {param} had been changed",
         "ATC arm position switch loose, signal bouncing", "magazine motor brake gap too large"),
        ("cleaned the proximity switch and set the gap to {mm} mm",
         "restored parameter {param} and re-taught the orientation",
         "tightened the switch bracket and readjusted the sensing distance",
         "adjusted the magazine motor brake gap"),
        ("clear chips around the magazine", "back up parameters after every change",
         "check ATC switch brackets"),
    )),
    ("plc", (
        ("冷却泵不出水", "冷却液压力低，刀具冷却不足", "冷却液液位低报警，实际液位正常",
         "冷却泵电机过载跳闸"),
        ("冷却泵叶轮被铁屑卡死", "冷却液过滤网堵塞", "液位浮球开关损坏", "冷却泵电机绕组烧毁"),
        ("拆泵清理叶轮，更换进水滤网", "清洗过滤网和水箱", "更换液位开关，确认PLC输入信号正常",
         "更换冷却泵电机"),
        ("水箱和过滤网清理", "切削液浓度检测", "冷却泵电流测量"),
    ), (
        ("coolant pump delivers no coolant", "coolant pressure low, poor tool cooling",
         "coolant level low alarm although the tank is full", "coolant pump motor trips overload"),
        ("pump impeller jammed with chips", "coolant filter screen clogged",
         "level float switch failed", "coolant pump motor winding burnt"),
        ("cleaned the impeller and replaced the inlet screen", "cleaned the screen and the tank",
         "replaced the level switch and checked the PLC input", "replaced the coolant pump motor"),
        ("clean tank and screens", "check coolant concentration", "measure pump motor current"),
    )),
    ("axis", (
        ("导轨润滑报警，润滑油位低", "{axis}轴导轨润滑不良，移动有爬行", "润滑泵不打油",
         "润滑压力开关报警"),
        ("润滑分配器堵塞", "润滑泵电机损坏", "润滑油管接头漏油", "润滑油牌号用错，黏度过高"),
        ("清洗润滑分配器，疏通油路", "更换润滑泵", "更换漏油接头并补充68#导轨油",
         "更换为规定牌号的导轨油并冲洗油路"),
        ("润滑油位每班检查", "润滑分配器清洗", "润滑报警不得屏蔽"),
    ), (
        ("way lube alarm, low level", "{axis} axis stick-slip because of poor lube",
         "lube pump not pumping", "lube pressure switch alarm"),
        ("lube distributor blocked", "lube pump motor failed", "lube line fitting leaking",
         "wrong oil grade used, viscosity too high"),
        ("cleaned the distributor and flushed the lines", "replaced the lube pump",
         "replaced the leaking fitting and topped up ISO VG 68 way oil",
         "changed to the specified way oil and flushed the system"),
        ("check lube level every shift", "clean the lube distributor",
         "never bypass the lube alarm"),
    )),
    ("plc", (
        ("液压卡盘夹紧力不足，工件打滑", "液压站压力低报警", "液压油温度高",
         "卡盘夹紧/松开动作缓慢"),
        ("减压阀阀芯卡滞，压力降到{n}bar", "液压油泵磨损，内泄严重", "液压站冷却风扇损坏",
         "液压油污染，电磁阀{part}卡滞"),
        ("拆洗减压阀，更换液压油和滤芯", "更换液压泵，压力调回规定值", "更换液压站冷却风扇",
         "更换电磁阀并过滤液压油"),
        ("液压油清洁度检查", "液压油每年更换", "液压站压力记录"),
    ), (
        ("hydraulic chuck clamping force low, parts slipping", "hydraulic unit pressure low alarm",
         "hydraulic oil temperature high", "chuck clamp/unclamp slow"),
        ("pressure reducing valve sticking, pressure down to {n} bar",
         "hydraulic pump worn, high internal leakage", "hydraulic unit cooling fan failed",
         "contaminated oil, solenoid valve {part} sticking"),
        ("cleaned the reducing valve, changed oil and filter",
         "replaced the hydraulic pump and reset the pressure", "replaced the hydraulic unit fan",
         "replaced the solenoid valve and filtered the oil"),
        ("check hydraulic oil cleanliness", "change hydraulic oil yearly",
         "log hydraulic pressure"),
    )),
    ("axis", (
        ("开机后{axis}轴回零位置不对", "{axis}轴绝对位置丢失，需要重新回零",
         "{axis}轴回零时减速开关不起作用",
         "{axis}轴位置显示跳动"),
        ("绝对编码器电池电压低，断电后位置丢失", "{axis}轴减速挡块松动",
         "{axis}轴编码器{part}信号不良",
         "光栅尺读数头被油污污染"),
        ("带电更换编码器电池，重新设定参考点", "紧固挡块并重新调整回零位置", "更换{axis}轴编码器",
         "清洁光栅尺并检查密封条"),
        ("编码器电池每年更换", "回零挡块紧固检查", "光栅尺气密保护检查"),
    ), (
        ("{axis} axis homes to the wrong position after power on",
         "{axis} axis absolute position lost, needs referencing",
         "{axis} axis decel switch ignored during homing", "{axis} axis position display jumps"),
        ("absolute encoder battery low, position lost at power off",
         "{axis} decel dog loose", "{axis} encoder {part} signal poor",
         "linear scale read head contaminated with oil"),
        ("changed the encoder battery with power on and set the reference",
         "tightened the dog and readjusted the home position", "replaced the {axis} encoder",
         "cleaned the linear scale and checked the seal lips"),
        ("change encoder batteries yearly", "check home dogs", "check scale air purge"),
    )),
    ("axis", (
        ("{axis}轴反向间隙大，加工尺寸超差", "{axis}轴移动有“咯噔”声", "{axis}轴定位精度下降",
         "圆弧加工有过象限凸起"),
        ("{axis}轴丝杠支撑轴承{part}损坏", "{axis}轴丝杠螺母预紧力下降，间隙{mm}mm",
         "联轴器紧定螺钉松动",
         "{axis}轴导轨镶条过松"),
        ("更换丝杠支撑轴承并重新预紧", "更换{axis}轴丝杠副，球杆仪测试合格", "紧固联轴器并涂螺纹胶",
         "重新调整镶条间隙并补偿反向间隙"),
        ("球杆仪精度检测", "联轴器紧固检查", "激光干涉仪定位精度检测"),
    ), (
        ("{axis} axis backlash large, parts out of tolerance", "{axis} axis clunks while moving",
         "{axis} axis positioning accuracy degraded", "quadrant bumps on circular interpolation"),
        ("{axis} ballscrew support bearing {part} damaged",
         "{axis} ballnut preload lost, backlash {mm} mm", "coupling set screws loose",
         "{axis} gib too loose"),
        ("replaced the support bearings and set the preload",
         "replaced the {axis} ballscrew assembly, ballbar test passed",
         "tightened the coupling with thread locker",
         "readjusted the gib and updated backlash compensation"),
        ("ballbar test", "check couplings", "laser interferometer accuracy check"),
    )),
    ("plc", (
        ("防护门关闭后无法启动循环", "电柜温度高报警", "急停无法复位", "三色灯不亮，机床无法启动"),
        ("门锁开关损坏", "电柜空调冷凝器堵塞", "急停回路继电器触点接触不良",
         "24V电源模块{part}损坏"),
        ("更换门锁开关，检查安全回路", "清理空调冷凝器，补充冷媒", "更换急停回路继电器",
         "更换24V电源模块"),
        ("门锁备件常备", "电柜空调滤网清洁", "安全回路功能测试"),
    ), (
        ("cycle start blocked after closing the door", "electrical cabinet over-temperature alarm",
         "e-stop cannot be reset", "stack light off, machine will not start"),
        ("door lock switch failed", "cabinet air conditioner condenser clogged",
         "e-stop relay contacts poor", "24 V power supply {part} failed"),
        ("replaced the door lock and tested the safety circuit",
         "cleaned the condenser and recharged the refrigerant",
         "replaced the e-stop relay", "replaced the 24 V power supply"),
        ("keep spare door locks", "clean cabinet AC filters", "test safety circuits"),
    )),
)  # fmt: skip

ZH_OPENERS: tuple[str, ...] = (
    "早班开机后", "夜班加工过程中", "自动运行约{h}小时后", "换型首件加工时", "精加工循环中",
    "空运行时", "刚完成保养后开机", "重切削时", "连续加工第{n}件时", "周一开机预热时",
    "回零过程中", "手动换刀时", "执行MDI程序时", "机床断电重启后", "加工铝件时", "加工铸铁件时",
    "客户验收试切时", "高温时段", "调试新程序时", "加工完成准备下料时", "{date}中班",
    "操作工{tech}反映", "批量生产中", "更换夹具后",
)  # fmt: skip
EN_OPENERS: tuple[str, ...] = (
    "At first-shift start-up, ", "During the night shift, ", "After about {h} h in auto, ",
    "On the first part of a new job, ", "During a finishing pass, ", "On a dry run, ",
    "Right after PM, ", "During heavy roughing, ", "On part number {n} of the batch, ",
    "During Monday warm-up, ", "While homing, ", "During a manual tool change, ",
    "Running an MDI program, ", "After a power cycle, ", "Cutting aluminium, ",
    "Cutting cast iron, ", "During the customer run-off, ", "On {date}, ",
    "Operator {tech} reports: ", "In production, ", "After a fixture change, ",
)  # fmt: skip
ZH_ALARM: tuple[str, ...] = (
    "，系统报警{code}",
    "，屏幕显示报警{code}",
    "，报{code}",
    "，出现报警{code}",
)
EN_ALARM: tuple[str, ...] = (", alarm {code} on screen", ", control shows {code}",
                             ", {code} displayed", " with alarm {code}")  # fmt: skip
ZH_OBS: tuple[str, ...] = (
    "，操作工反映近{n}天偶尔出现", "，当班已停机等待维修", "，复位后可短暂恢复", "，伴有焦糊味",
    "，负载表显示约{n}%", "，现场测得温度约{t}℃", "，同型号设备未出现类似问题", "，故障时有时无",
    "，影响当天交货计划", "，停机约{h}小时", "，工件报废{n}件", "，断电重启后故障依旧",
    "，噪声比平时明显增大", "，报警履历中有多次记录", "，首次出现是在{date}", "，夜班未做处理",
)  # fmt: skip
EN_OBS: tuple[str, ...] = (
    "; operator says it happened on and off for {n} days", "; machine down waiting for service",
    "; reset clears it for a while", "; burning smell noticed", "; load meter about {n} %",
    "; measured about {t} C on site", "; sister machines are fine", "; intermittent fault",
    "; delivery for today at risk", "; down for about {h} h", "; {n} parts scrapped",
    "; power cycle does not help", "; much louder than usual", "; alarm history shows repeats",
    "; first seen on {date}",
)  # fmt: skip
ZH_LEAD: tuple[str, ...] = (
    "经检查，", "检查发现", "拆检后确认", "用万用表测量后判断", "排查电气回路后发现",
    "查看诊断数据，",
    "现场分析：", "与厂家工程师电话确认后判断", "逐项排查后确认", "",
)  # fmt: skip
EN_LEAD: tuple[str, ...] = (
    "Found ", "Inspection showed ", "After teardown: ", "Metered out: ", "Traced to: ",
    "Diagnostics showed ", "On-site analysis: ", "Confirmed with the OEM: ",
)  # fmt: skip
ZH_EVID: tuple[str, ...] = (
    "，测得数值偏离正常值约{n}%", "，相关部件已使用约{h}小时", "，与上次故障原因相同",
    "，现场照片已存档",
    "，部件表面有明显磨损痕迹", "，参数{param}设定值无异常", "，拆下的部件已送检", "，属于正常老化",
)  # fmt: skip
EN_EVID: tuple[str, ...] = (
    ", reading about {n} % off nominal", ", part had about {h} h of service",
    ", same root cause as last time", ", photos filed", ", visible wear on the part",
    ", parameter {param} unchanged", ", removed part sent for analysis", ", normal ageing",
)  # fmt: skip
ZH_TAIL: tuple[str, ...] = (
    "，试机正常", "，连续运行{h}小时无报警", "，试切{n}件尺寸合格", "，故障排除，交付生产",
    "，观察一周未再出现",
    "，空运行{h}小时正常后交付", "，已恢复生产", "，报警消除，机床恢复正常", "，经操作工确认正常",
    "，重新校验精度合格", "，恢复正常加工", "，设备验收合格",
)  # fmt: skip
EN_TAIL: tuple[str, ...] = (
    ", test run ok", ", ran {h} h without alarm", ", {n} test parts in tolerance",
    ", fault cleared, back in production", ", no repeat in one week of monitoring",
    ", dry run {h} h then released", ", machine returned to production",
    ", alarm cleared and machine normal", ", operator signed off", ", accuracy re-verified",
    ", normal machining resumed", ", accepted by production",
)  # fmt: skip
WORKPIECE_ZH: tuple[str, ...] = (
    "法兰盘", "变速箱壳体", "轴承座", "液压阀块", "电机端盖", "齿轮坯", "模具型腔", "铝合金支架",
    "不锈钢接头", "泵体", "连杆", "刹车盘", "航空铝框架", "钛合金螺母", "主轴套筒", "叶轮",
)  # fmt: skip
WORKPIECE_EN: tuple[str, ...] = (
    "flanges", "gearbox housings", "bearing blocks", "valve bodies", "motor end caps",
    "gear blanks", "mold cavities", "aluminium brackets", "stainless fittings", "pump bodies",
    "connecting rods", "brake discs", "airframe ribs", "titanium nuts", "spindle sleeves",
    "impellers",
)  # fmt: skip
ZH_CONTEXT: tuple[str, ...] = (
    "，当时正在加工{wp}", "，加工{wp}（程序O{n}）", "，正在粗铣{wp}", "，批量生产{wp}时",
    "，{wp}精镗工序", "，换产{wp}第一天", "，加工{wp}用{axis}轴联动程序", "，{wp}订单加急生产中",
)  # fmt: skip
EN_CONTEXT: tuple[str, ...] = (
    " while cutting {wp}", " on {wp} (program O{n})", " while roughing {wp}",
    " in a batch of {wp}", " in the {wp} boring op", " on day one of the {wp} job",
    " running a multi-axis {wp} program", " on a rush order of {wp}",
)  # fmt: skip
ZH_DETAIL: tuple[str, ...] = (
    "，更换后用手轮低速试运行确认无异常", "，同时清理了周边油污和铁屑",
    "，并对相关接线端子进行了紧固",
    "，已向操作工交代注意事项", "，拆下的旧件做了标记待分析", "，作业前已执行挂牌上锁",
    "，维修用时约{h}小时", "，顺便检查了同轴其他部件未见异常", "，更换过程中对密封件一并更新",
    "，完成后做了{n}次重复动作测试",
)  # fmt: skip
EN_DETAIL: tuple[str, ...] = (
    "; jogged slowly with the handwheel afterwards, no issue", "; cleaned oil and chips around it",
    "; re-torqued the related terminals", "; briefed the operator",
    "; tagged the removed part for analysis", "; lockout/tagout applied before work",
    "; repair took about {h} h", "; checked the other parts on that axis, ok",
    "; renewed the seals at the same time", "; cycled it {n} times to verify",
)  # fmt: skip
ZH_FREQ: tuple[str, ...] = (
    "每周",
    "每月",
    "每季度",
    "每半年",
    "每班",
    "每{h}小时",
    "年度保养时",
    "二级保养时",
)
EN_FREQ: tuple[str, ...] = (
    "Weekly: ", "Monthly: ", "Quarterly: ", "Every 6 months: ", "Every shift: ",
    "Every {h} h: ", "At the annual PM: ", "At level-2 PM: ",
)  # fmt: skip
ZH_REMARK: tuple[str, ...] = (
    "备件已申请", "待观察", "已通知厂家工程师", "费用计入设备科", "更换下的旧件已入库",
    "需采购备件{part}",
    "周末安排复查", "已更新点检表", "联系人：{tech}，电话13{phone}", "已拍照上传", "外协维修",
    "保修期内", "备件{part}库存不足", "班组长已确认",
)  # fmt: skip
EN_REMARK: tuple[str, ...] = (
    "Parts ordered", "Monitor", "OEM notified", "Old part returned to stores",
    "Need spare {part}", "Recheck at the weekend", "PM checklist updated",
    "Contact {tech}, cell 555-{phone}", "Photos uploaded", "Under warranty",
    "Low stock of {part}", "Supervisor signed off",
)  # fmt: skip
ZH_FILLER: tuple[str, ...] = (
    "本次停机约{h}小时，影响产量约{n}件。", "已在设备履历卡上登记。",
    "更换下来的{part}已退回备件库。",
    "维修记录已由班组长{tech}签字确认。", "故障期间生产任务已转至其他设备。",
    "维修前后均已拍照存档。",
    "已同步更新设备点检表和备件台账。", "下次保养时复查该部位。",
)  # fmt: skip
EN_FILLER: tuple[str, ...] = (
    "Downtime about {h} h, roughly {n} parts lost.", "Logged in the machine history card.",
    "Removed {part} returned to stores.", "Record signed off by supervisor {tech}.",
    "Production moved to another machine meanwhile.", "Before/after photos filed.",
    "PM checklist and spares list updated.", "Recheck this area at the next PM.",
)  # fmt: skip
ZH_CUES: tuple[tuple[str, str, str, str], ...] = (
    ("现象：", "原因：", "处理：", "建议："), ("故障现象：", "检查发现：", "维修：", "预防："),
    ("症状：", "诊断：", "措施：", "保养："), ("现象:", "原因分析:", "处理措施:", "预防措施:"),
)  # fmt: skip
EN_CUES: tuple[tuple[str, str, str, str], ...] = (
    ("Symptom: ", "Root cause: ", "Fix: ", "Recommendation: "),
    ("Problem: ", "Found: ", "Repair: ", "PM: "),
    ("Complaint: ", "Diagnosis: ", "Action: ", "Prevention: "),
)

# Layouts: 0 four columns, 1 no prevention, 2 symptom + action, 3 free text, 4 fault log.
LAYOUT_P = (0.40, 0.15, 0.20, 0.20, 0.05)
# Duplicate edits.
EDITS: tuple[str, ...] = (
    "exact", "meta", "insert", "delete", "punct", "space", "tail", "fullwidth",
)  # fmt: skip
EDIT_P = (0.20, 0.10, 0.15, 0.15, 0.10, 0.10, 0.15, 0.05)
ROLES = ("singleton", "original", *EDITS, "negative_code", "negative_machine")


# ---------------------------------------------------------------- helpers


def _s(values: tuple[str, ...] | list[str]) -> pl.Series:
    return pl.Series(values, dtype=pl.String)


def _by_lang(zh: tuple[str, ...], en: tuple[str, ...], lang: np.ndarray, r: np.ndarray):
    """Per-row pick from the zh or en bank (lang 0 = zh, 1 = en) with random ints r."""
    flat = _s(zh + en)
    idx = np.where(lang == 0, r % len(zh), len(zh) + r % len(en))
    return flat.gather(idx)


class _Banks:
    """Category banks flattened for vectorized gathers: part -> (flat series, offsets, counts)."""

    def __init__(self) -> None:
        self.parts: dict[int, tuple[pl.Series, np.ndarray, np.ndarray]] = {}
        ncat = len(CATEGORIES)
        for part in range(4):
            flat: list[str] = []
            off = np.zeros((2, ncat), dtype=np.int64)
            cnt = np.zeros((2, ncat), dtype=np.int64)
            for lang in range(2):
                for c, cat in enumerate(CATEGORIES):
                    bank = cat[1 + lang][part]
                    off[lang, c], cnt[lang, c] = len(flat), len(bank)
                    flat.extend(bank)
            self.parts[part] = (_s(flat), off, cnt)

    def pick(
        self, part: int, lang: np.ndarray, cat: np.ndarray, r: np.ndarray, values
    ) -> pl.Series:
        flat, off, cnt = self.parts[part]
        return _filled(tuple(flat.to_list()), off[lang, cat] + r % cnt[lang, cat], values)


def _codes_flat() -> tuple[pl.Series, np.ndarray, np.ndarray]:
    flat: list[str] = []
    off = np.zeros((len(FAMILIES), len(GROUPS)), dtype=np.int64)
    cnt = np.zeros_like(off)
    for f, fam in enumerate(FAMILIES):
        for g, grp in enumerate(GROUPS):
            off[f, g], cnt[f, g] = len(flat), len(CODES[fam][grp])
            flat.extend(CODES[fam][grp])
    return _s(flat), off, cnt


def _params_flat() -> tuple[pl.Series, np.ndarray, np.ndarray]:
    flat: list[str] = []
    off = np.zeros(len(FAMILIES), dtype=np.int64)
    cnt = np.zeros_like(off)
    for f, fam in enumerate(FAMILIES):
        off[f], cnt[f] = len(flat), len(PARAMS[fam])
        flat.extend(PARAMS[fam])
    return _s(flat), off, cnt


_FULLWIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}


# ---------------------------------------------------------------- generation


def _plan(rows: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Which base incident each row copies, with which edit, and its cluster id (unshuffled)."""
    target = int(round(rows * CLUSTER_SHARE))
    sizes = rng.integers(2, 7, size=max(1, target // 2 + 1))
    cum = np.cumsum(sizes)
    sizes = sizes[: int(np.searchsorted(cum, target, side="right"))]
    rest = target - int(sizes.sum())
    if rest >= 2:
        sizes = np.append(sizes, rest)
    n_neg_code = int(rows * CODE_NEGATIVE_SHARE)
    n_neg_machine = int(rows * MACHINE_NEGATIVE_SHARE)
    clustered = int(sizes.sum())
    singles = rows - clustered - n_neg_code - n_neg_machine
    if singles < n_neg_code + n_neg_machine:  # tiny corpora: no hard negatives
        n_neg_code = n_neg_machine = 0
        singles = rows - clustered
    n_clusters = len(sizes)
    n_base = n_clusters + singles
    # rows: cluster members, then singletons, then negatives
    member_base = np.repeat(np.arange(n_clusters), sizes)
    first = (np.cumsum(sizes) - sizes).astype(np.int64)  # each cluster's first row
    is_first = np.zeros(clustered, dtype=bool)
    is_first[first] = True
    edit = rng.choice(len(EDITS), size=clustered, p=EDIT_P) + 2
    role = np.where(is_first, 1, edit)
    single_base = np.arange(n_clusters, n_base)
    neg_code_base = single_base[:n_neg_code]
    neg_machine_base = single_base[n_neg_code : n_neg_code + n_neg_machine]
    base = np.concatenate([member_base, single_base, neg_code_base, neg_machine_base])
    role = np.concatenate(
        [
            role,
            np.zeros(singles, dtype=np.int64),
            np.full(n_neg_code, len(ROLES) - 2),
            np.full(n_neg_machine, len(ROLES) - 1),
        ]
    )
    cluster = np.concatenate(
        [member_base, single_base, n_base + np.arange(n_neg_code + n_neg_machine)]
    )
    negative_of = np.concatenate(
        [np.full(clustered + singles, -1), neg_code_base, neg_machine_base]
    )
    return {
        "base": base.astype(np.int64),
        "role": role.astype(np.int64),
        "cluster": cluster.astype(np.int64),
        "negative_of_base": negative_of.astype(np.int64),
        "n_base": np.array([n_base]),
        "machine_neg_bases": neg_machine_base,
    }


def _filled(flat: tuple[str, ...], idx: np.ndarray, values: dict[str, pl.Series]) -> pl.Series:
    """`flat[idx]` per row with each `{name}` placeholder replaced by the row's
    `values[name]`; only rows whose template holds the placeholder are touched."""
    out = _s(flat).gather(idx)
    for name, vals in values.items():
        has = np.array(["{" + name + "}" in t for t in flat], dtype=bool)
        rows = np.flatnonzero(has[idx]) if has.any() else np.empty(0, dtype=np.int64)
        if rows.size:
            sub = pl.DataFrame({"t": out.gather(rows), "v": vals.gather(rows)}).select(
                pl.col("t").str.replace_all("{" + name + "}", pl.col("v"), literal=True)
            )
            out = out.scatter(rows, sub.to_series())
    return out


def _lang_idx(zh: tuple[str, ...], en: tuple[str, ...], lang: np.ndarray, r: np.ndarray):
    """Index into `zh + en`: a zh entry for lang 0, an en entry for lang 1."""
    return np.where(lang == 0, r % len(zh), len(zh) + r % len(en))


def _cap(expr: pl.Expr) -> pl.Expr:
    """Upper-case the first character (English sentences)."""
    return expr.str.slice(0, 1).str.to_uppercase() + expr.str.slice(1)


def _zh() -> pl.Expr:
    return pl.col("_lang") == 0


def _en() -> pl.Expr:
    return pl.col("_lang") == 1


def _both(zh: str, en: str) -> pl.Expr:
    return pl.when(_zh()).then(pl.lit(zh)).otherwise(pl.lit(en))


def _when(flag: str, value: pl.Expr) -> pl.Expr:
    return pl.when(pl.col(flag)).then(value).otherwise(pl.lit(""))


def _char_edit(col: pl.Expr, op: pl.Expr, r: pl.Expr, zh: pl.Expr) -> pl.Expr:
    """Apply a small edit (op 0 insert, 1 delete, 2 punctuation, 3 whitespace) to `col`."""
    length = col.str.len_chars()
    pos = (r % (length + 1)).cast(pl.Int64)
    ins = (
        pl.when(zh)
        .then(pl.lit(["的", "了", "，", "后", "再", "也"]).list.get(r % 6))
        .otherwise(pl.lit(["s", "e", ",", "the ", "a", "."]).list.get(r % 6))
    )
    insert = col.str.slice(0, pos) + ins + col.str.slice(pos)
    k = 1 + (r // 7) % 3
    dpos = (r % pl.max_horizontal(length - k, pl.lit(1))).cast(pl.Int64)
    delete = col.str.slice(0, dpos) + col.str.slice(dpos + k)
    variant = (r // 5) % 3
    zh_punct = (
        pl.when(variant == 0)
        .then(col.str.replace_all("，", ",", literal=True).str.replace_all("。", ".", literal=True))
        .when(variant == 1)
        .then(col.str.strip_chars_end("。"))
        .otherwise(col.str.replace("，", "、", literal=True))
    )
    en_punct = (
        pl.when(variant == 0)
        .then(col.str.strip_chars_end("."))
        .when(variant == 1)
        .then(col.str.replace(", ", "; ", literal=True))
        .otherwise(col.str.replace(" ", " - ", literal=True))
    )
    punct = pl.when(zh).then(zh_punct).otherwise(en_punct)
    punct = (
        pl.when(punct == col)
        .then(col + pl.when(zh).then(pl.lit("！")).otherwise(pl.lit("!")))
        .otherwise(punct)
    )
    gap = pl.lit([" ", "  ", "\n", " \n "]).list.get((r // 3) % 4)
    space = col.str.slice(0, pos) + gap + col.str.slice(pos)
    return (
        pl.when(op == 0)
        .then(insert)
        .when(op == 1)
        .then(delete)
        .when(op == 2)
        .then(punct)
        .otherwise(space)
    )


_MACHINE_FAMILY = np.array([FAMILIES.index(m[2]) for m in MACHINES])
_CATEGORY_GROUP = np.array([GROUPS.index(c[0]) for c in CATEGORIES])


@dataclass(frozen=True)
class _Rows:
    """What each row (unshuffled) is made of: its base incident's random ints `r`, its own
    random ints `rr` (edits) and the choices taken from them, one entry per row."""

    r: np.ndarray  # (rows, 24) random ints of the base incident
    rr: np.ndarray  # (rows, 6) random ints of the row itself
    role: np.ndarray  # index into ROLES
    lang: np.ndarray  # 0 zh, 1 en
    layout: np.ndarray  # index into LAYOUT_P
    cat: np.ndarray  # index into CATEGORIES
    machine: np.ndarray  # index into MACHINES
    family: np.ndarray  # index into FAMILIES
    has_code: np.ndarray  # the record shows its alarm code
    code: pl.Series  # the alarm code, full-width on fullwidth edits
    mention: np.ndarray  # the symptom names the machine model
    remark: np.ndarray  # a remark is wanted
    days: np.ndarray  # report day, counted from 2022-01-01
    minutes: np.ndarray  # report minute of that day


def _corpus(rows: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(records with cluster_id, ground truth with edit kind and negative_of), shuffled."""
    rng = np.random.default_rng(np.random.PCG64(seed))
    plan = _plan(rows, rng)
    drawn = _base_draws(int(plan["n_base"][0]), plan["negative_of_base"], rng)
    # per-row draws (edits)
    rr = rng.integers(0, 2**31 - 1, size=(len(plan["base"]), 6), dtype=np.int64)
    row = _per_row(plan, drawn, rr)
    values = _placeholder_values(row)
    frame = _shape_pieces(_row_frame(row, values, _pieces(row, values)))
    frame = _assemble(_switch_optional(frame))
    frame = _metadata(_edit_characters(frame, row))
    return _shuffle(frame, plan, rng)


def _base_draws(
    n_base: int, negative_of_base: np.ndarray, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Per-base draws, shared by every copy of an incident; the singletons that hard
    negatives copy always show their alarm code and name their machine."""
    drawn = {
        "r": rng.integers(0, 2**31 - 1, size=(n_base, 24), dtype=np.int64),
        "lang": (rng.random(n_base) < 0.30).astype(np.int64),
        "layout": rng.choice(len(LAYOUT_P), size=n_base, p=LAYOUT_P),
        "alarm": rng.random(n_base) < 0.7,
        "mention": rng.random(n_base) < 0.4,
        "remark": rng.random(n_base) < 0.45,
        "days": rng.integers(0, 3 * 365, size=n_base),
        "minutes": rng.integers(7 * 60, 23 * 60, size=n_base),
    }
    neg_bases = negative_of_base[negative_of_base >= 0]
    drawn["alarm"][neg_bases] = True
    drawn["mention"][neg_bases] = True
    return drawn


def _per_row(plan: dict[str, np.ndarray], drawn: dict[str, np.ndarray], rr: np.ndarray) -> _Rows:
    """Each row's copy of its base incident's draws, with its machine and alarm code."""
    b = plan["base"]
    r = drawn["r"][b]
    cat = r[:, 0] % len(CATEGORIES)
    role, machine, code, has_code = _alarm_codes(plan["role"], r, rr, cat, drawn["alarm"][b])
    return _Rows(
        r=r,
        rr=rr,
        role=role,
        lang=drawn["lang"][b],
        layout=drawn["layout"][b],
        cat=cat,
        machine=machine,
        family=_MACHINE_FAMILY[machine],
        has_code=has_code,
        code=code,
        mention=drawn["mention"][b],
        remark=drawn["remark"][b],
        days=drawn["days"][b],
        minutes=drawn["minutes"][b],
    )


def _alarm_codes(
    role: np.ndarray, r: np.ndarray, rr: np.ndarray, cat: np.ndarray, alarm: np.ndarray
) -> tuple[np.ndarray, np.ndarray, pl.Series, np.ndarray]:
    """(role, machine, code, has_code) per row. Hard negatives take another alarm code of
    the same family, or else another machine (and become negative_machine); a fullwidth
    edit of a record that shows no code becomes an insert."""
    role = role.copy()
    machine = r[:, 1] % len(MACHINES)
    group = _CATEGORY_GROUP[cat]
    codes, c_off, c_cnt = _codes_flat()
    pool = c_cnt[_MACHINE_FAMILY[machine], group]
    code_i = r[:, 3] % pool
    has_code = alarm & (_MACHINE_FAMILY[machine] != FAMILIES.index("mazak"))

    neg_code = (role == ROLES.index("negative_code")) & has_code & (pool > 1)
    role[(role == ROLES.index("negative_code")) & ~neg_code] = ROLES.index("negative_machine")
    code_i = np.where(neg_code, (code_i + 1 + rr[:, 0] % np.maximum(pool - 1, 1)) % pool, code_i)
    machine = _other_machine(machine, role == ROLES.index("negative_machine"), rr[:, 0])
    family = _MACHINE_FAMILY[machine]
    code = codes.gather(c_off[family, group] + code_i % c_cnt[family, group])

    role[(role == ROLES.index("fullwidth")) & ~has_code] = ROLES.index("insert")
    fullwidth = role == ROLES.index("fullwidth")
    code = pl.select(
        pl.when(pl.Series(fullwidth)).then(code.str.replace_many(_FULLWIDTH)).otherwise(code)
    ).to_series()
    return role, machine, code, has_code


def _other_machine(machine: np.ndarray, negative: np.ndarray, rnd: np.ndarray) -> np.ndarray:
    """`machine`, with another machine of the same controller family on `negative` rows."""
    same_family = [
        [j for j, m in enumerate(MACHINES) if m[2] == fam and m != MACHINES[i]]
        for i, (_, _, fam) in enumerate(MACHINES)
    ]
    moved = machine.copy()
    for i in np.unique(machine[negative]):  # at most len(MACHINES) iterations
        rows = negative & (machine == i)
        choices = np.array(same_family[i])  # every family has two machines or more
        moved[rows] = choices[rnd[rows] % len(choices)]
    return moved


def _num(values: np.ndarray) -> pl.Series:
    return pl.Series(values).cast(pl.String)


def _placeholder_values(row: _Rows) -> dict[str, pl.Series]:
    """Each row's value of every `{placeholder}` of the text banks, in replacement order."""
    r, lang = row.r, row.lang
    params, p_off, p_cnt = _params_flat()
    days = pl.Series(row.days)
    return {
        "axis": _s(("X", "Y", "Z", "A", "B", "X", "Y", "Z")).gather(r[:, 5] % 8),
        "n": _num(2 + r[:, 6] % 97),
        "h": _num(1 + r[:, 7] % 47),
        "t": _num(38 + r[:, 8] % 55),
        "mm": "0.0" + _num(1 + r[:, 9] % 95),
        "part": _s(PARTS).gather(r[:, 10] % len(PARTS)),
        "param": params.gather(p_off[row.family] + r[:, 13] % p_cnt[row.family]),
        "code": row.code,
        "date": pl.select(
            (pl.date(2022, 1, 1) + pl.duration(days=days)).dt.strftime("%Y-%m-%d")
        ).to_series(),
        "tech": _filled(TECH_ZH + TECH_EN, _lang_idx(TECH_ZH, TECH_EN, lang, r[:, 15]), {}),
        "phone": _num(100000000 + r[:, 14] % 899999999),
        "wp": _filled(
            WORKPIECE_ZH + WORKPIECE_EN, _lang_idx(WORKPIECE_ZH, WORKPIECE_EN, lang, r[:, 12]), {}
        ),
    }


def _pieces(row: _Rows, values: dict[str, pl.Series]) -> dict[str, pl.Series]:
    """Each row's text pieces `p_<name>` in its language, placeholders filled; a reworded
    tail copy takes another verification tail than its original."""
    r, lang = row.r, row.lang
    tail_r = r[:, 11].copy()
    reword = row.role == ROLES.index("tail")
    tail_r[reword] += 1 + row.rr[reword, 1] % (len(ZH_TAIL) - 1)  # ZH_TAIL and EN_TAIL: 12 each
    draws = {
        "opener": (ZH_OPENERS, EN_OPENERS, r[:, 17]),
        "alarm": (ZH_ALARM, EN_ALARM, r[:, 18]),
        "obs": (ZH_OBS, EN_OBS, r[:, 19]),
        "context": (ZH_CONTEXT, EN_CONTEXT, r[:, 19] // 3),
        "lead": (ZH_LEAD, EN_LEAD, r[:, 21]),
        "evid": (ZH_EVID, EN_EVID, r[:, 23]),
        "tail": (ZH_TAIL, EN_TAIL, tail_r),
        "freq": (ZH_FREQ, EN_FREQ, r[:, 21] // 11),
        "remark": (ZH_REMARK, EN_REMARK, r[:, 15] // 29),
        "detail": (ZH_DETAIL, EN_DETAIL, r[:, 2]),
        "filler": (ZH_FILLER, EN_FILLER, r[:, 18] // 3),
        "filler2": (ZH_FILLER, EN_FILLER, r[:, 18] // 3 + 1 + r[:, 6] % 7),
    }
    pieces = {
        "p_" + k: _filled(zh + en, _lang_idx(zh, en, lang, rv), values)
        for k, (zh, en, rv) in draws.items()
    }
    banks = _Banks()
    for part, name in enumerate(("sym", "cause", "act", "prev")):
        pieces["p_" + name] = banks.pick(part, lang, row.cat, r[:, 20 + part] // 7, values)
    return pieces


def _row_frame(
    row: _Rows, values: dict[str, pl.Series], pieces: dict[str, pl.Series]
) -> pl.DataFrame:
    """One row per record: its draws and flags as `_` columns, its text pieces as `p_`."""
    r, rr, lang, machine = row.r, row.rr, row.lang, row.machine
    return pl.DataFrame(
        {
            "_lang": lang,
            "_layout": row.layout,
            "_role": row.role,
            "_has_code": row.has_code,
            "_mention": row.mention,
            "_has_obs": (r[:, 19] % 3) > 0,
            "_has_evid": (r[:, 23] % 2) == 0,
            "_has_detail": (r[:, 12] % 4) == 0,
            "_has_context": (r[:, 14] % 2) == 0,
            "_has_remark": row.remark,
            "_days": pl.Series(row.days),
            "_minutes": row.minutes,
            "_code": row.code,
            "_date": values["date"],
            "_tech": values["tech"],
            "_tech2": _by_lang(TECH_ZH, TECH_EN, lang, r[:, 15] + 1 + rr[:, 2] % 7),
            "_model": _s([m[0] for m in MACHINES]).gather(machine),
            "_prefix": _s([m[1] for m in MACHINES]).gather(machine),
            "_unit": _num(1 + (r[:, 16] + machine * 7) % 60),
            "_status": _by_lang(STATUS_ZH, STATUS_EN, lang, r[:, 16] // 3),
            "_cues": _by_lang(
                tuple("|".join(c) for c in ZH_CUES),
                tuple("|".join(c) for c in EN_CUES),
                lang,
                r[:, 21] // 5,
            ),
            "_rr4": rr[:, 4],
            "_rr5": rr[:, 5],
            **pieces,
        }
    )


def _shape_pieces(frame: pl.DataFrame) -> pl.DataFrame:
    """Pieces made ready to join: the machine mention bracketed, the alarm only where the
    code shows, a comma after a Chinese opener, English cause and action capitalized (the
    cause only without a lead) and the sentence end `_end`."""
    en = _en()
    return frame.with_columns(
        p_mention=_when(
            "_mention",
            pl.when(_zh())
            .then("【" + pl.col("_model") + "】")
            .otherwise("[" + pl.col("_model") + "] "),
        ),
        p_alarm=_when("_has_code", pl.col("p_alarm")),
        p_opener=pl.when(_zh()).then(pl.col("p_opener") + "，").otherwise(pl.col("p_opener")),
        p_lead=pl.when(en & (pl.col("p_lead") == "")).then(pl.lit("")).otherwise(pl.col("p_lead")),
        p_cause=pl.when(en & (pl.col("p_lead") == ""))
        .then(_cap(pl.col("p_cause")))
        .otherwise(pl.col("p_cause")),
        p_act=pl.when(en).then(_cap(pl.col("p_act"))).otherwise(pl.col("p_act")),
        _end=_both("。", "."),
    )


def _len(column: str) -> pl.Expr:
    return pl.col(column).str.len_chars()


def _core_length() -> pl.Expr:
    """Characters of a record's text by layout without its optional pieces, tail and
    mention, the same for every copy of an incident; the code counts as 10 characters so
    that code hard negatives gate like their original."""
    layout = pl.col("_layout")
    alarm_len = pl.when("_has_code").then(_len("p_alarm") - _len("_code") + 10).otherwise(0)
    sym_len = _len("p_opener") + _len("p_sym") + alarm_len + 1
    cause_len = _len("p_lead") + _len("p_cause") + 1
    act_len = _len("p_act") + 1
    prev_len = _len("p_freq") + _len("p_prev") + 1
    log_len = 11 + pl.when("_has_code").then(10).otherwise(_len("_code")) + _len("p_sym")
    return (
        pl.when(layout == 4)
        .then(log_len + act_len)
        .when(layout == 2)
        .then(sym_len + act_len)
        .when(layout == 1)
        .then(sym_len + cause_len + act_len)
        .when(layout == 0)
        .then(sym_len + cause_len + act_len + prev_len)
        .otherwise(sym_len + cause_len + act_len + prev_len + 12)  # free text: + cue words
    )


def _switch_optional(frame: pl.DataFrame) -> pl.DataFrame:
    """Flags `_<piece>_on`, `_fill1`, `_fill2` and `_remark_on`: optional pieces are random,
    or forced while the record is below the floor, and never take it over the cap."""
    max_tail = max(len(t) for t in ZH_TAIL + EN_TAIL) + 2
    max_mention = max(len(m[0]) for m in MACHINES) + 3
    cap = MAX_CHARS - max_tail - max_mention - 8
    floor = MIN_CHARS + 6  # the tail (>= 5 characters, not in _core) covers edits (<= 6 removed)
    layout = pl.col("_layout")
    has_cause = (layout == 0) | (layout == 1) | (layout == 3)
    frame = frame.with_columns(_core=_core_length())
    for flag, piece, wanted, allowed in (
        ("_context_on", "p_context", pl.col("_has_context"), pl.lit(True)),
        ("_obs_on", "p_obs", pl.col("_has_obs"), pl.lit(True)),
        ("_detail_on", "p_detail", pl.col("_has_detail"), pl.lit(True)),
        ("_evid_on", "p_evid", pl.col("_has_evid"), has_cause),
    ):
        short = pl.col("_core") < floor
        fits = pl.col("_core") + _len(piece) <= cap
        frame = frame.with_columns(((wanted | short) & allowed & fits).alias(flag)).with_columns(
            _core=pl.col("_core") + pl.when(flag).then(_len(piece)).otherwise(0)
        )
    frame = frame.with_columns(
        _fill1=pl.col("_core") < floor,
        _fill2=pl.col("_core") + _len("p_filler") + 1 < floor,
    )
    return frame.with_columns(
        _remark_on=(pl.col("_has_remark") | pl.col("_fill2"))
        & (pl.col("_core") + _len("p_remark") <= cap)
    )


def _symptom_texts() -> tuple[pl.Expr, pl.Expr]:
    """(the symptom sentence of the column layouts, the fault-log line of layout 4)."""
    sym = pl.concat_str(
        [
            pl.col("p_mention"),
            pl.col("p_opener"),
            pl.col("p_sym"),
            _when("_context_on", pl.col("p_context")),
            pl.col("p_alarm"),
            _when("_obs_on", pl.col("p_obs")),
            pl.col("_end"),
        ]
    )
    log_sym = pl.concat_str(
        [
            pl.col("p_mention"),
            pl.col("_date"),
            pl.lit(" "),
            pl.col("_code"),
            pl.lit(" "),
            pl.when(_en()).then(_cap(pl.col("p_sym"))).otherwise(pl.col("p_sym")),
            _when("_context_on", pl.col("p_context")),
            _when("_obs_on", pl.col("p_obs")),
            pl.col("_end"),
        ]
    )
    return sym, log_sym


def _assemble(frame: pl.DataFrame) -> pl.DataFrame:
    """The four parts and the remarks, by layout: symptom, cause, action, prevention,
    remarks (free text puts all four parts, after cue words, in the symptom)."""
    sym, log_sym = _symptom_texts()
    cause = pl.concat_str(
        [pl.col("p_lead"), pl.col("p_cause"), _when("_evid_on", pl.col("p_evid")), pl.col("_end")]
    )
    act = pl.concat_str(
        [pl.col("p_act"), _when("_detail_on", pl.col("p_detail")), pl.col("p_tail"), pl.col("_end")]
    )
    prev = pl.concat_str([pl.col("p_freq"), pl.col("p_prev"), pl.col("_end")])
    cue = pl.col("_cues").str.split("|")
    gap = _both("", " ")
    free = pl.concat_str(
        [
            cue.list.get(0), sym, gap, cue.list.get(1), cause, gap,
            cue.list.get(2), act, gap, cue.list.get(3), prev,
        ]
    )  # fmt: skip
    remark_parts = pl.concat_str(
        [
            _when("_remark_on", pl.col("p_remark") + pl.col("_end")),
            _when("_fill1", pl.col("p_filler")),
            _when("_fill2", gap + pl.col("p_filler2")),
        ]
    )
    layout = pl.col("_layout")
    return frame.with_columns(
        symptom=pl.when(layout == 3).then(free).when(layout == 4).then(log_sym).otherwise(sym),
        cause=pl.when((layout == 0) | (layout == 1)).then(cause),
        action=pl.when(layout != 3).then(act),
        prevention=pl.when(layout == 0).then(prev),
        remarks=pl.when(remark_parts != "").then(remark_parts),
    )


def _edit_characters(frame: pl.DataFrame, row: _Rows) -> pl.DataFrame:
    """Character-level edits on duplicates, in the symptom or the action: a first edit by
    role, and sometimes a second one (insert, punctuation or whitespace)."""
    role, rr = row.role, row.rr
    op1 = np.full(len(role), -1)
    for k, name in enumerate(("insert", "delete", "punct", "space")):
        op1[role == ROLES.index(name)] = k
    editable = (role >= ROLES.index("insert")) & (role <= ROLES.index("fullwidth"))
    second = np.array([0, 2, 3])[rr[:, 4] // 10 % 3]  # insert, punctuation or whitespace
    op2 = np.where(editable & (rr[:, 4] % 10 < 3), second, -1)
    on_action = (rr[:, 3] % 2 == 1) & (row.layout != 3)
    for op, rnd in ((op1, rr[:, 3] // 2), (op2, rr[:, 5])):
        for column, mask in (("symptom", ~on_action), ("action", on_action)):
            rows = np.flatnonzero((op >= 0) & mask)
            sub = pl.DataFrame(
                {
                    "s": frame[column].gather(rows),
                    "op": op[rows],
                    "r": rnd[rows],
                    "l": row.lang[rows],
                }
            ).select(_char_edit(pl.col("s"), pl.col("op"), pl.col("r"), pl.col("l") == 0))
            frame = frame.with_columns(frame[column].scatter(rows, sub.to_series()))
    return frame


def _metadata(frame: pl.DataFrame) -> pl.DataFrame:
    """Asset, model, report time, technician and status: copies are re-entered later (except
    exact copies), meta edits change the technician."""
    role = pl.col("_role")
    shift_h = pl.when(role >= ROLES.index("meta")).then(1 + pl.col("_rr5") % 72).otherwise(0)
    when = pl.datetime(2022, 1, 1) + pl.duration(
        days=pl.col("_days"), minutes=pl.col("_minutes"), hours=shift_h
    )
    return frame.with_columns(
        asset=pl.col("_prefix") + "-" + pl.col("_unit").str.zfill(3),
        machine_model=pl.col("_model"),
        reported_at=pl.when(pl.col("_rr4") % 4 == 0)
        .then(when.dt.strftime("%Y/%m/%d %H:%M"))
        .otherwise(when.dt.strftime("%Y-%m-%d %H:%M")),
        technician=pl.when(role == ROLES.index("meta"))
        .then(pl.col("_tech2"))
        .otherwise(pl.col("_tech")),
        status=pl.col("_status"),
    )


def _shuffle(
    frame: pl.DataFrame, plan: dict[str, np.ndarray], rng: np.random.Generator
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Shuffle and number the records: (records with cluster_id, ground truth)."""
    n = frame.height
    perm = rng.permutation(n)
    frame = frame.with_columns(
        _cluster=pl.Series(plan["cluster"]),
        _base=pl.Series(plan["base"]),
        _neg_base=pl.Series(plan["negative_of_base"]),
    )[perm]
    frame = frame.with_columns(
        order_id=pl.lit("WO") + (pl.int_range(1, n + 1)).cast(pl.String).str.zfill(8)
    )
    single_of_base = frame.filter(pl.col("_role") == ROLES.index("singleton")).select(
        pl.col("_base").alias("_neg_base"), pl.col("order_id").alias("negative_of")
    )
    records = frame.select(*FIELDS, cluster_id=pl.col("_cluster").cast(pl.Int64))
    truth = (
        frame.select(
            pl.int_range(0, n, dtype=pl.Int64).alias("position"),
            "order_id",
            pl.col("_cluster").cast(pl.Int64).alias("cluster_id"),
            _s(ROLES).gather(frame["_role"]).alias("edit"),
            "_neg_base",
        )
        .join(single_of_base, on="_neg_base", how="left", maintain_order="left")
        .drop("_neg_base")
    )
    return records, truth


def generate(rows: int, seed: int = 0) -> pl.DataFrame:
    """`rows` synthetic work orders: the string fields of FIELDS plus `cluster_id` (Int64),
    equal for the members of one near-duplicate cluster and unique otherwise."""
    return _corpus(rows, seed)[0]


def ground_truth(rows: int, seed: int = 0) -> pl.DataFrame:
    """Ground truth of `generate(rows, seed)`: position, order_id, cluster_id, edit (how the
    record was made: singleton, original, exact, meta, insert, delete, punct, space, tail,
    fullwidth, negative_code, negative_machine) and negative_of (order id of the record a
    hard negative copies)."""
    return _corpus(rows, seed)[1]


def _csv_bytes(frame: pl.DataFrame, style: int) -> bytes:
    encoding, terminator = ENCODINGS[style]
    text = frame.rename(dict(zip(FIELDS, HEADERS[style], strict=True))).write_csv(
        line_terminator=terminator
    )
    return text.encode(encoding)


def write_corpus(
    rows: int, out: Path, seed: int = 0, fmt: str = "csv", shards: int = 1
) -> list[Path]:
    """Write `rows` records as `shards` files `part-NNNNN.<fmt>` plus `clusters.parquet`
    (position, order_id, cluster_id, shard, shard_row, edit, negative_of) into `out`."""
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"format must be csv or parquet, not {fmt!r}")
    if rows < 1 or shards < 1:
        raise ValueError("rows and shards must be >= 1")
    records, truth = _corpus(rows, seed)
    out.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, rows, min(shards, rows) + 1).astype(np.int64)
    paths: list[Path] = []
    shard_of = np.zeros(rows, dtype=np.int64)
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        part = records.slice(int(lo), int(hi - lo)).drop("cluster_id")
        path = out / f"part-{i:05d}.{fmt}"
        if fmt == "csv":
            path.write_bytes(_csv_bytes(part, i % len(HEADERS)))
        else:
            part.write_parquet(path, compression="zstd", statistics=False)
        shard_of[lo:hi] = i
        paths.append(path)
    names = _s([p.name for p in paths])
    truth = truth.with_columns(
        shard=names.gather(shard_of),
        shard_row=pl.Series(np.arange(rows) - bounds[shard_of]),
    ).select("position", "order_id", "cluster_id", "shard", "shard_row", "edit", "negative_of")
    truth.write_parquet(out / "clusters.parquet", compression="zstd", statistics=False)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv")
    parser.add_argument("--shards", type=int, default=1)
    args = parser.parse_args(argv)
    paths = write_corpus(args.rows, args.out, args.seed, args.format, args.shards)
    print(f"wrote {args.rows} records in {len(paths)} {args.format} shard(s) to {args.out}")


if __name__ == "__main__":
    main()
