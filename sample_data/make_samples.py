"""Writes the hand-written sample work-order exports in `sample_data/workorders/`.

The rows below were written for this project: a fictional CNC maintenance shop with FANUC,
SINUMERIK, Mitsubishi, Heidenhain, Haas and Mazak machines, exported the way real
maintenance systems export (GBK CSV with Chinese headers, UTF-8-BOM CSV with English
headers, an XLSX with merged cells, a GB18030 CSV). Every row carries tags saying what it
is meant to exercise; the README table and `sample_index()` are built from them, with the
physical line (CSV) or sheet row (XLSX) where each record starts.

Run `python -m sample_data.make_samples` to rewrite the files (output is byte-stable).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import xlsxwriter

OUT_DIR = Path(__file__).parent / "workorders"

ZH_CSV = "维修工单_2024.csv"
EN_CSV = "service_orders_en.csv"
XLSX = "工单导出_merged.xlsx"
GB18030_CSV = "gb18030_extra.csv"

ZH_HEADER = (
    "工单号",
    "设备编号",
    "机床型号",
    "报修时间",
    "故障现象",
    "原因分析",
    "处理措施",
    "预防措施",
    "维修人员",
    "状态",
    "备注",
)
EN_HEADER = (
    "Order No",
    "Asset",
    "Machine Model",
    "Reported At",
    "Problem Description",
    "Cause",
    "Corrective Action",
    "Preventive Action",
    "Technician",
    "Status",
    "Remarks",
)
XLSX_HEADER = (
    "工单编号",
    "设备编号",
    "机床型号",
    "报修日期",
    "故障描述",
    "故障原因",
    "维修措施",
    "预防建议",
    "维修人",
    "状态",
    "备注",
)

# Tags (README explains each).
TAGS: dict[str, str] = {
    "expert": "all four parts, specific diagnosis and concrete action (tier A material)",
    "usable": "symptom + action + cause or prevention (tier B material)",
    "sym_action": "symptom and action only",
    "freetext": "story in the symptom column with cue words (现象/原因/处理/建议, Symptom/…)",
    "test_row": "test entry (测试, test, asdf)",
    "placeholder": "placeholder content (同上, 1111, N/A, 无, -)",
    "empty": "empty or nearly empty record",
    "too_short": "text too short to be useful",
    "complaint": "customer complaint only, no technical content",
    "phone_only": "only a phone number",
    "pii": "phone / e-mail / Chinese ID number / person name in free text",
    "fullwidth_code": "full-width alarm code (ＳＶ０４０１, ＡＬＭ４１４)",
    "code_context": "parameter number, date or part number next to an alarm code",
    "mojibake_gbk": "UTF-8 text that was decoded as GBK (鍐峰嵈娉... for 冷却泵...)",
    "mojibake_latin": "Latin mojibake of the ftfy kind (Ã©, Â°, â€™)",
    "unrecoverable": "锟斤拷 run: the original text is lost",
    "quoted_multiline": "quoted field holding commas and line breaks",
    "exact_dup": "exact duplicate of another record's text (see 'of')",
    "near_dup": "same incident re-entered with small edits (see 'of')",
    "code_differs": "identical to another record except the alarm code: NOT a duplicate (see 'of')",
    "merged_blank": "设备编号/机床型号 blank because merged with the row above (fill down)",
    "gb18030_only": "characters outside GBK (needs GB18030)",
    "malformed": "wrong number of fields (quarantine with this line number)",
}


@dataclass(frozen=True)
class Row:
    """One hand-written record: the eleven export fields plus what it is meant to test."""

    fields: tuple[str, ...]
    tags: tuple[str, ...] = ()
    of: str = ""  # order id of the record this one duplicates / pairs with
    raw: str | None = None  # a raw (malformed) CSV line written as is instead of `fields`
    when: dt.datetime | None = None  # XLSX: written as a real date cell


@dataclass
class Placed:
    """Where a record ended up in its file."""

    file: str
    line: int  # CSV: 1-based physical line where the record starts; XLSX: 1-based sheet row
    order_id: str
    tags: tuple[str, ...]
    of: str = ""
    of_line: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


def _r(*fields: str, tags: tuple[str, ...] = (), of: str = "") -> Row:
    assert len(fields) == 11, fields
    return Row(tuple(fields), tags, of)


def china_id(prefix17: str) -> str:
    """A syntactically valid (checksummed) but invented resident ID number."""
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    total = sum(int(c) * w for c, w in zip(prefix17, weights, strict=True))
    return prefix17 + "10X98765432"[total % 11]


def utf8_read_as_gbk(text: str) -> str:
    """Mojibake as a GBK program shows UTF-8 bytes; undecodable bytes become '?'."""
    return text.encode("utf-8").decode("gbk", errors="replace").replace("\ufffd", "?")


def latin_mojibake(text: str) -> str:
    """Mojibake as a cp1252 program shows UTF-8 bytes (what ftfy repairs)."""
    return text.encode("utf-8").decode("cp1252")


ID_1 = china_id("11010519880307123")
ID_2 = china_id("32058419920815402")

# ---------------------------------------------------------------- 维修工单_2024.csv (GBK)
FANUC_VMC = "VMC850（FANUC 0i-MF）"
SY_828 = "沈阳机床 VMC0850B（SINUMERIK 828D）"
DL_LATHE = "大连机床 CKA6150（FANUC 0i-TF）"
DMU50 = "DMG MORI DMU 50（Heidenhain TNC 640）"
HAAS = "Haas VF-2"
M80 = "友嘉 FV-1000A（三菱 M80）"
MAKINO = "牧野 a61nx（FANUC 31i-B）"
DMU65 = "DMG MORI DMU 65 monoBLOCK（SINUMERIK 840D sl）"
GANTRY = "济二 XK2425 龙门（SINUMERIK 840D sl）"
MAZAK = "Mazak VCN-530C（Mazatrol SmoothG）"

# fmt: off
ZH_ROWS: list[Row] = [
    _r("WX2024-0001", "CNC-03", FANUC_VMC, "2024-01-08 08:20",
       "早班开机X轴报警SV0401（V就绪信号关闭），复位无效，伺服放大器LED显示“5”。",
       "检查发现X轴伺服放大器A06B-6117-H105电源板DC LINK电压检测异常，拆检放大器内部电容鼓包。",
       "更换X轴伺服放大器（A06B-6117-H105），上电后核对参数1825、1826无误，X轴回零正常，试切工件尺寸合格。",
       "电柜加装防尘滤网，每季度清理电柜积尘并检查放大器散热风扇。",
       "张伟", "已完成", "", tags=("expert", "code_context")),
    _r("WX2024-0002", "CNC-07", SY_828, "2024-01-09 14:05",
       "自动加工中报警25040 静止监控 Y轴，机床急停，Y轴停在离工件约5mm处。",
       "Y轴丝杠与电机联轴器紧定螺钉松动，电机转动时丝杠滞后，位置误差超出MD36030设定值。",
       "紧固联轴器并涂螺纹胶，反向间隙复测0.008mm，用激光干涉仪复测定位精度合格。",
       "每半年检查各轴联轴器紧固情况，列入二级保养点检表。",
       "李强", "已完成", "", tags=("expert", "code_context")),
    _r("WX2024-0003", "CNC-11", MAZAK, "2024-01-10 09:40",
       "刀库旋转到位后换刀臂不动作，屏幕提示换刀超时，只能手动复位刀库。",
       "刀库定位接近开关感应面被切屑和油污覆盖，到位信号时有时无。",
       "清理接近开关并重新调整感应距离至1.5mm，在诊断画面确认到位信号稳定，连续换刀200次无异常。",
       "每周清理刀库区域切屑，接近开关加装防护罩。",
       "王磊", "已完成", "", tags=("expert",)),
    _r("WX2024-0004", "CNC-15", DL_LATHE, "2024-01-12 10:15",
       "液压卡盘夹紧力不足，车削外圆时工件打滑，表面有明显振纹。",
       "液压站压力由3.5MPa降至2.0MPa，减压阀阀芯卡滞。",
       "拆洗减压阀，更换46#抗磨液压油和吸油滤芯，压力调回3.5MPa，试车正常。",
       "每500小时检查液压油清洁度，每年换油一次。",
       "刘洋", "已完成", "", tags=("expert",)),
    _r("WX2024-0005", "CNC-21", DMU50, "2024-01-15 16:30",
       "主轴升速至8000rpm时TNC 640报错8B40，主轴停止，低速运行正常。",
       "主轴编码器（ERN 1387）信号线插头氧化，信号幅值偏低，高速时丢脉冲。",
       "清洁并重新压接编码器插头，更换屏蔽电缆，测得信号幅值恢复到约1Vpp，主轴升速正常。",
       "编码器电缆与动力线分槽走线，年度保养时检查插头。",
       "陈浩", "已完成", "", tags=("expert",)),
    _r("WX2024-0006", "CNC-02", HAAS, "2024-01-17 11:00",
       "X轴快速移动时出现Alarm 108 X SERVO OVERLOAD，复位后可继续运行，一天出现三四次。",
       "X轴导轨润滑不足，润滑泵压力开关报警长期被忽略，导轨阻力增大导致电机过载。",
       "更换润滑泵单元并疏通X轴润滑油路，清洗导轨滑块，空运行4小时负载率由85%降到35%。",
       "每日开机检查润滑油位，润滑报警不得屏蔽。",
       "赵敏", "已完成", "", tags=("expert",)),
    _r("WX2024-0007", "CNC-09", M80, "2024-01-19 07:50",
       "Z轴报警S01 0052 过大误差1，断电后Z轴下落约2mm。",
       "Z轴电机抱闸线圈烧损，抱闸打不开，电机带闸运行。",
       "更换Z轴伺服电机抱闸（HG204S同型号），检查抱闸电源DC24V正常，重新调整重力轴防落参数。",
       "抱闸电源和抱闸动作纳入月度点检。",
       "孙涛", "已完成", "", tags=("expert",)),
    _r("WX2024-0008", "CNC-05", MAKINO, "2024-01-22 13:25",
       "主轴报警SP9001 主轴电机过热，每次加工约1小时后出现。",
       "主轴电机冷却风扇停转，风扇轴承卡死。",
       "更换主轴电机风扇（A90L-0001-0538/R），清理散热片，连续运行3小时电机温度稳定在55℃。",
       "每月检查风扇运转与散热片积尘。",
       "周杰", "已完成", "", tags=("expert", "code_context")),
    _r("WX2024-0009", "CNC-18", DMU65, "2024-01-25 09:10",
       "报警700016 冷却液液位低，实际水箱液位正常，自动循环无法启动。",
       "液位浮球开关损坏，触点常开。",
       "更换液位开关，在PLC状态表确认I3.5信号随液位变化，报警消除。",
       "每周清理水箱，防止切屑卡住浮球。",
       "吴昊", "已完成", "", tags=("expert",)),
    _r("WX2024-0010", "CNC-24", GANTRY, "2024-01-29 15:40",
       "横梁升降后W轴夹紧不到位，报警700102，无法执行自动程序。",
       "夹紧油缸压力继电器设定值偏高，液压压力正常但夹紧信号不到。",
       "重新设定压力继电器至4.5MPa，反复验证夹紧/松开信号，W轴动作正常。",
       "压力继电器设定值贴标签，禁止随意调整。",
       "郑凯", "已完成", "", tags=("expert",)),
    # --- symptom + action only
    _r("WX2024-0011", "CNC-04", FANUC_VMC, "2024-02-01 08:05",
       "冷却泵不出水。", "", "更换冷却泵电机热继电器，复位后出水正常。", "",
       "张伟", "已完成", "", tags=("sym_action",)),
    _r("WX2024-0012", "CNC-12", DL_LATHE, "2024-02-02 10:30",
       "排屑器卡死不转，链板上缠满长铁屑。", "", "停机清理链板卡住的长铁屑，调整链条张紧。", "",
       "刘洋", "已完成", "", tags=("sym_action",)),
    _r("WX2024-0013", "CNC-06", SY_828, "2024-02-03 14:45",
       "防护门关上后无法启动循环，提示门未锁。", "", "更换门锁开关，门锁信号恢复正常。", "",
       "李强", "已完成", "", tags=("sym_action",)),
    _r("WX2024-0014", "CNC-08", FANUC_VMC, "2024-02-05 09:20",
       "主轴换挡时有异响，声音像齿轮打齿。", "", "调整换挡拨叉位置，加注主轴箱润滑油。", "",
       "王磊", "已完成", "", tags=("sym_action",)),
    # --- symptom + action + cause or prevention
    _r("WX2024-0015", "CNC-10", M80, "2024-02-06 11:35",
       "刀具松刀困难，换刀时刀柄拔不出来。", "气压只有0.35MPa，低于0.5MPa要求。",
       "排查发现空压机管路接头漏气，更换接头后气压恢复0.6MPa，松刀正常。", "",
       "孙涛", "已完成", "", tags=("usable",)),
    _r("WX2024-0016", "CNC-14", HAAS, "2024-02-07 16:10",
       "Alarm 161 X-AXIS DRIVE FAULT，X轴无法使能。", "",
       "检查X轴动力线有一相对地绝缘低，更换动力电缆后报警消除。", "动力电缆拖链定期检查磨损。",
       "赵敏", "已完成", "", tags=("usable",)),
    # --- free text in the symptom column
    _r("WX2024-0017", "CNC-01", FANUC_VMC, "2024-02-08 08:45",
       "现象：换刀时主轴定向不准，刀柄撞刀库刀爪。原因：主轴定向参数4077被误改。处理：恢复参数4077原值"
       "并重新调整定向位置，换刀测试50次正常。建议：参数修改须经设备科确认并做好备份。",
       "", "", "", "陈浩", "已完成", "", tags=("freetext", "code_context")),
    _r("WX2024-0018", "CNC-19", SY_828, "2024-02-10 13:15",
       "故障现象：X轴移动有爬行，低速时尤为明显，报警25050轮廓监控。诊断：检查发现X轴导轨镶条过紧，"
       "润滑油量不足。措施：重新调整镶条间隙，清洗润滑分配器。保养：润滑分配器每季度检查一次。",
       "", "", "", "郑凯", "已完成", "", tags=("freetext",)),
    _r("WX2024-0019", "CNC-22", DMU50, "2024-02-12 09:55",
       "症状：第四轴（A轴）回零位置每次偏差0.02°。分析：A轴夹紧刹车片磨损，夹紧时轴有微量转动。"
       "维修：更换刹车片，重新标定A轴零点。定期：每年检查刹车片厚度。",
       "", "", "", "吴昊", "已完成", "", tags=("freetext",)),
    # --- messy
    _r("WX2024-0020", "CNC-03", FANUC_VMC, "2024-02-13 10:00",
       "测试", "测试", "测试", "", "admin", "已关闭", "", tags=("test_row",)),
    _r("WX2024-0021", "CNC-03", FANUC_VMC, "2024-02-13 10:02",
       "test", "", "test", "", "admin", "已关闭", "测试数据请忽略", tags=("test_row",)),
    _r("WX2024-0022", "", "", "2024-02-13 10:05",
       "asdf", "asdf", "", "", "", "", "", tags=("test_row",)),
    _r("WX2024-0023", "CNC-07", SY_828, "2024-02-14 08:30",
       "同上", "同上", "同上", "同上", "李强", "已完成", "", tags=("placeholder",)),
    _r("WX2024-0024", "CNC-11", MAZAK, "2024-02-14 09:15",
       "1111", "1111", "1111", "", "王磊", "处理中", "", tags=("placeholder",)),
    _r("WX2024-0025", "CNC-15", DL_LATHE, "2024-02-15 11:20",
       "N/A", "N/A", "N/A", "N/A", "刘洋", "已关闭", "", tags=("placeholder",)),
    _r("WX2024-0026", "CNC-06", SY_828, "2024-02-15 14:00",
       "无", "无", "无", "无", "李强", "已关闭", "无", tags=("placeholder",)),
    _r("WX2024-0027", "CNC-12", DL_LATHE, "2024-02-16 08:40",
       "-", "-", "-", "-", "-", "已关闭", "-", tags=("placeholder",)),
    _r("WX2024-0028", "", "", "", "", "", "", "", "", "", "", tags=("empty",)),
    _r("WX2024-0029", "CNC-08", FANUC_VMC, "2024-02-17 15:30",
       "坏了", "", "修好", "", "王磊", "已完成", "", tags=("too_short",)),
    _r("WX2024-0030", "CNC-02", HAAS, "2024-02-19 09:00",
       "怎么又坏了！！催了三天了，还没人来修，生产任务完不成谁负责？", "", "", "",
       "", "处理中", "车间主任投诉", tags=("complaint",)),
    _r("WX2024-0031", "CNC-10", M80, "2024-02-19 10:30",
       "13912345678", "", "", "", "", "处理中", "", tags=("phone_only",)),
    _r("WX2024-0032", "CNC-05", MAKINO, "2024-02-20 08:15",
       "主轴拉刀报警，松拉刀检测开关无信号。", "拉刀检测开关位置偏移。",
       "重新调整拉刀检测开关位置，松拉刀信号正常。", "",
       "周杰", "已完成",
       "联系人：王建国 13800138000，邮箱 wang.jianguo@example.com，来访登记身份证号 " + ID_1,
       tags=("usable", "pii")),
    _r("WX2024-0033", "CNC-16", FANUC_VMC, "2024-02-21 13:40",
       "Y轴报警ＳＶ０４１１（运动时误差过大），快移时出现。",
       "Y轴伺服电机编码器A860-2000-T301线缆被拖链磨破。",
       "更换编码器电缆，参数1828（移动中位置偏差极限）保持原值，Y轴快移正常。",
       "拖链内电缆重新整理固定，每季度检查。",
       "张伟", "已完成", "", tags=("expert", "fullwidth_code", "code_context")),
    _r("WX2024-0034", "CNC-17", "VMC850（FANUC 0i-MC）", "2024-02-22 10:10",
       "老机床报ＡＬＭ４１４，X轴过电流，2024-03-15前须恢复生产。",
       "X轴伺服电机线圈对地短路，绝缘电阻0.2MΩ。",
       "更换X轴伺服电机A06B-0235-B400，重新设定参数2021负载惯量比，试切合格。",
       "电机接线盒密封，防止切削液渗入。",
       "刘洋", "已完成", "备件2024-03-10到货", tags=("expert", "fullwidth_code", "code_context")),
    _r("WX2024-0035", "CNC-04", FANUC_VMC, "2024-02-23 09:30",
       utf8_read_as_gbk("冷却泵不出水，冷却液箱液位正常。"), utf8_read_as_gbk("冷却泵电机烧坏。"),
       utf8_read_as_gbk("更换冷却泵电机，试机出水正常。"), "",
       "张伟", "已完成", "", tags=("sym_action", "mojibake_gbk")),
    _r("WX2024-0036", "CNC-13", SY_828, "2024-02-26 14:20",
       "主轴锟斤拷锟斤拷锟斤拷，加工锟斤拷锟斤拷振纹", "锟斤拷锟斤拷", "更换锟斤拷承", "",
       "李强", "已完成", "", tags=("unrecoverable",)),
    _r("WX2024-0037", "CNC-20", DMU65, "2024-02-27 08:50",
       "换刀过程中报警，步骤如下：\n1. 机械手抓刀后停止，\n2. 屏幕显示700102，\n"
       "3. 复位后机械手回原位",
       "机械手抓刀到位开关松动，信号抖动。",
       "紧固到位开关支架，调整感应距离，换刀100次无报警。",
       "机械手各开关支架加防松垫片，每月点检。",
       "吴昊", "已完成", "请注意：备件A、B、C均已领用，\n剩余备件放在二号库",
       tags=("expert", "quoted_multiline")),
    _r("WX2024-0038", "CNC-09", M80, "2024-02-28 11:05",
       "Y轴移动时有“咯噔”声，速度越快越明显。", "Y轴丝杠支撑轴承损坏。",
       "更换Y轴丝杠两端支撑轴承（7204 P4 DF配对），重新预紧，声音消失。",
       "按手册每2000小时检查丝杠轴承预紧。",
       "孙涛", "已完成", "", tags=("expert",)),
    _r("WX2024-0039", "CNC-09", M80, "2024-02-28 11:05",
       "Y轴移动时有“咯噔”声，速度越快越明显。", "Y轴丝杠支撑轴承损坏。",
       "更换Y轴丝杠两端支撑轴承（7204 P4 DF配对），重新预紧，声音消失。",
       "按手册每2000小时检查丝杠轴承预紧。",
       "孙涛", "已完成", "", tags=("expert", "exact_dup"), of="WX2024-0038"),
    _r("WX2024-0040", "CNC-01", FANUC_VMC, "2024-03-01 09:00",
       "X轴报警SV0410，停机状态下出现，复位后再次出现。",
       "X轴电机抱闸间隙过小，停止时抱闸拖拽电机轴。",
       "调整X轴电机抱闸间隙，核对参数1829停止时位置偏差极限为500，报警消除。",
       "抱闸间隙纳入年度检查项目。",
       "陈浩", "已完成", "", tags=("expert", "code_context")),
    _r("WX2024-0041", "CNC-01", FANUC_VMC, "2024-03-01 09:00",
       "X轴报警SV0411，停机状态下出现，复位后再次出现。",
       "X轴电机抱闸间隙过小，停止时抱闸拖拽电机轴。",
       "调整X轴电机抱闸间隙，核对参数1829停止时位置偏差极限为500，报警消除。",
       "抱闸间隙纳入年度检查项目。",
       "陈浩", "已完成", "", tags=("expert", "code_differs"), of="WX2024-0040"),
    _r("WX2024-0042", "CNC-22", DMU50, "2024-03-04 10:40",
       "主轴升速至8000rpm时TNC 640报错8B40,主轴停止,低速运行正常",
       "主轴编码器（ERN 1387）信号线插头氧化，信号幅值偏低，高速时丢脉冲。",
       "清洁并重新压接编码器插头，更换屏蔽电缆，测得信号幅值恢复到约1Vpp，主轴升速正常。",
       "编码器电缆与动力线分槽走线，年度保养时检查插头。",
       "吴昊", "已完成", "", tags=("expert", "near_dup"), of="WX2024-0005"),
    _r("WX2024-0043", "CNC-02", HAAS, "2024-03-05 11:30",
       "X轴快速移动时出现 Alarm 108 X SERVO OVERLOAD，复位后可以继续运行，一天出现三四次",
       "X轴导轨润滑不足，润滑泵压力开关报警长期被忽略，导轨阻力增大导致电机过载。",
       "更换润滑泵单元并疏通X轴润滑油路，清洗导轨滑块，空运行4小时负载率由85%降到35%。试机正常。",
       "每日开机检查润滑油位，润滑报警不得屏蔽。",
       "赵敏", "已完成", "补录", tags=("expert", "near_dup"), of="WX2024-0006"),
    _r("WX2024-0044", "CNC-12", DL_LATHE, "2024-03-06 08:25",
       "排屑器卡死不转，链板上缠满长铁屑。", "", "停机清理链板卡住的长铁屑，调整链条张紧。", "",
       "刘洋", "已完成", "", tags=("sym_action", "exact_dup"), of="WX2024-0012"),
    _r("WX2024-0045", "CNC-23", GANTRY, "2024-03-08 13:50",
       "龙门铣主轴箱平衡油缸压力低，报警700045，Z轴下行时有冲击。",
       "平衡系统蓄能器氮气压力不足，仅剩4MPa（设定8MPa）。",
       "蓄能器补充氮气至8MPa，检查平衡油缸密封无泄漏，Z轴运动平稳。",
       "每半年检测蓄能器预充压力。",
       "郑凯", "已完成", "", tags=("expert",)),
    _r("WX2024-0046", "CNC-16", FANUC_VMC, "2024-03-11 09:40",
       "开机后显示SV0301 APC报警：通信错误，X轴无法移动。",
       "X轴绝对编码器电池电压低，电池更换时断电，位置数据丢失。",
       "带电更换电池（A98L-0031-0012），重新设定X轴参考点，参数1815#4置1，回零确认正常。",
       "编码器电池每年更换一次，必须在上电状态下更换。",
       "张伟", "已完成", "", tags=("expert", "code_context")),
    _r("WX2024-0047", "CNC-13", SY_828, "2024-03-12 15:10",
       "报警207016 电机温度报警，主轴电机温度达到120℃。", "主轴电机风扇滤网堵塞。",
       "清理风扇滤网并吹扫电机散热片，温度回落至60℃以下。", "每周清理风扇滤网。",
       "李强", "已完成", "", tags=("expert",)),
    _r("WX2024-0048", "CNC-11", MAZAK, "2024-03-13 10:20",
       "工作台交换（APC）不到位，托盘抬起后无法旋转。", "",
       "APC旋转油缸内泄，更换油缸密封组件。", "",
       "王磊", "已完成", "", tags=("sym_action",)),
    _r("WX2024-0049", "CNC-21", DMU50, "2024-03-14 11:45",
       "工件表面出现周期性刀纹，间距约3mm。", "B轴转台蜗轮副磨损，反向间隙达到0.03°。",
       "调整蜗杆轴向位置，反向间隙降到0.005°，重新补偿。", "",
       "陈浩", "已完成", "", tags=("usable",)),
    _r("WX2024-0050", "CNC-18", DMU65, "2024-03-18 08:35",
       "报警25201 驱动故障 Z轴，伴随驱动报警207900电机堵转。",
       "Z轴电机抱闸继电器触点粘连，抱闸不释放。",
       "更换抱闸继电器（24V DC），检查抱闸释放时间，Z轴运行正常。",
       "电柜继电器按寿命周期更换。",
       "吴昊", "已完成", "客户联系电话：0571-88886666，王工", tags=("expert", "pii")),
    _r("WX2024-0051", "CNC-05", MAKINO, "2024-03-19 14:15",
       "主轴报警SP9002，主轴速度偏差过大，重切削时出现。",
       "主轴皮带打滑，皮带张紧不足且有老化裂纹。",
       "更换主轴同步带，按规定张力调整，重切削试验正常。",
       "主轴皮带每年检查张力。",
       "周杰", "已完成", "", tags=("expert",)),
    _r("WX2024-0052", "CNC-14", HAAS, "2024-03-20 10:00",
       "电柜空调不制冷，电柜内温度超过45℃。", "", "清理空调冷凝器，补充冷媒。", "",
       "赵敏", "已完成", "", tags=("sym_action",)),
    _r("WX2024-0053", "CNC-03", FANUC_VMC, "2024-03-21 09:25",
       "对刀仪对刀数据跳动，同一把刀连续测量差0.02mm。", "对刀仪测头表面有切削液残留和铁屑。",
       "清洁对刀仪测头并重新标定，重复性达到0.002mm。", "每班加工前用气枪吹净对刀仪。",
       "张伟", "已完成", "", tags=("expert",)),
    _r("WX2024-0054", "CNC-19", SY_828, "2024-03-22 13:05",
       "现象：主轴启动后报警，要求尽快处理！原因：未查明。处理：重启后正常，继续观察。",
       "", "", "", "郑凯", "待观察", "班长：明天早上八点前必须修好", tags=("freetext",)),
    _r("WX2024-0055", "CNC-06", SY_828, "2024-03-25 08:10",
       "润滑泵报警，导轨润滑油位低。", "", "补充导轨油（68#），检查油路无泄漏。", "",
       "李强", "已完成", "", tags=("sym_action",)),
    _r("WX2024-0056", "CNC-17", "VMC850（FANUC 0i-MC）", "2024-03-26 10:55",
       "怎么又坏了！！", "", "", "", "", "处理中", "", tags=("complaint",)),
    _r("WX2024-0057", "CNC-20", DMU65, "2024-03-27 15:25",
       "第四轴转台夹紧报警700203，加工中转台松开。", "转台夹紧液压阀线圈烧坏。",
       "更换电磁阀线圈（24V DC），夹紧压力检测正常。", "液压阀线圈备件常备库存。",
       "吴昊", "已完成", "", tags=("expert",)),
    _r("WX2024-0058", "CNC-10", M80, "2024-03-28 09:45",
       "X轴报警S02 0037 初始参数异常，更换电池后出现。", "驱动器参数在断电过程中丢失。",
       "重新导入驱动器参数备份，X轴回零并核对软限位，运行正常。", "驱动器参数每年备份一次。",
       "孙涛", "已完成", "", tags=("expert",)),
    _r("WX2024-0059", "CNC-08", FANUC_VMC, "2024-03-29 11:10",
       "报警OT0500正向超程，X轴撞到硬限位。", "操作工手动移动时倍率过大。",
       "释放超程后反向移出，检查限位挡块和开关无损坏。", "操作工培训，手动移动使用低倍率。",
       "王磊", "已完成", "操作工：刘小明", tags=("expert", "pii")),
    _r("WX2024-0060", "CNC-04", FANUC_VMC, "2024-04-01 08:55",
       "主轴松刀时漏气严重，有嘶嘶声。", "打刀缸密封圈老化。", "更换打刀缸密封组件。", "",
       "张伟", "已完成", "", tags=("usable",)),
    _r("WX2024-0061", "CNC-15", DL_LATHE, "2024-04-02 14:40",
       "尾座顶尖套筒伸出无力，顶不住工件。", "", "尾座油缸密封损坏，更换密封后正常。", "",
       "刘洋", "已完成", "", tags=("sym_action",)),
]
ZH_MALFORMED_AFTER = "WX2024-0048"  # the malformed raw line is written right after this record
ZH_MALFORMED = Row(
    ("WX2024-0049X",),
    tags=("malformed",),
    raw="WX2024-0049X,CNC-21,VMC850,2024-03-14 11:50,主轴异响,轴承磨损,更换轴承,定期润滑,"
    "陈浩,已完成,备注,多余字段,再多一个",
)

# ---------------------------------------------------------------- service_orders_en.csv
EN_ROWS: list[Row] = [
    _r("SO-24-1001", "M-101", "Haas VF-2 (NGC)", "2024-02-01 07:45",
       "Alarm 108 X SERVO OVERLOAD during rapid moves; machine stops every few hours.",
       "X-axis way lube starved: lube pump pressure switch failed, axis drag raised motor load.",
       "Replaced lube pump assembly, flushed X-axis lines and metering units; 4 h dry run with "
       "load meter at 30-35 %.",
       "Check lube reservoir level at every shift start; never bypass the low-lube alarm.",
       "Mike Turner", "Closed", "", tags=("expert",)),
    _r("SO-24-1002", "M-102", "Haas VF-2 (NGC)", "2024-02-02 09:10",
       "Alarm 161 X-AXIS DRIVE FAULT at power-up, axis will not enable.",
       "Motor power cable chafed inside the cable carrier, phase V shorted to ground (0.1 MOhm).",
       "Replaced X motor cable, megger test > 500 MOhm, axis enabled and homed.",
       "Inspect cable carrier for wear at the 6-month PM.",
       "Mike Turner", "Closed", "", tags=("expert",)),
    _r("SO-24-1003", "M-205", "DMG MORI CMX 1100 V (SINUMERIK 840D sl)", "2024-02-05 13:30",
       "Alarm 25000 Axis Z hardware fault of active encoder, Z stops during rapid.",
       "Encoder connector at the motor loose, coolant ingress in the plug.",
       "Dried and re-terminated the encoder connector, new seal, verified MD36400 unchanged.",
       "Add connector boots on all axis motors.",
       "Laura Chen", "Closed", "", tags=("expert", "code_context")),
    _r("SO-24-1004", "M-206", "Mazak Integrex i-200", "2024-02-06 10:15",
       "Turret does not index, stops between stations.",
       "",
       "Replaced the turret clamp proximity switch and adjusted the gap to 1 mm.",
       "",
       "Dave Wilson", "Closed", "", tags=("sym_action",)),
    _r("SO-24-1005", "M-310", "FANUC Robodrill a-D21MiB5 (31i-B)", "2024-02-07 08:20",
       "SV0436 soft thermal (OVC) on Z axis after about 40 min of tapping cycles.",
       "Z-axis counterbalance gas spring lost pressure, motor carries the full head weight.",
       "Replaced the gas spring, checked parameter 2021 and load meter, Z load back to 25 %.",
       "Log Z-axis load weekly to catch balance loss early.",
       "Raj Patel", "Closed", "", tags=("expert", "code_context")),
    _r("SO-24-1006", "M-311", "Okuma-style VMC (FANUC 0i-MF)", "2024-02-08 15:00",
       "Spindle noisy above 6000 rpm, vibration on parts.",
       "Front spindle bearings worn, runout 0.012 mm at the taper.",
       "Spindle cartridge rebuilt by vendor and reinstalled; runout 0.002 mm.",
       "Vibration check of spindle every quarter.",
       "Raj Patel", "Closed", "", tags=("expert",)),
    _r("SO-24-1007", "M-207", "DMG MORI DMU 50 (Heidenhain TNC 640)", "2024-02-09 11:25",
       "Symptom: B-axis does not clamp, error 8B40 shown on TNC 640. Root cause: clamp pressure "
       "switch set too high. Fix: readjusted switch to 45 bar and verified clamp signal. "
       "Recommendation: lock adjustment screws after setting.",
       "", "", "", "Laura Chen", "Closed", "", tags=("freetext",)),
    _r("SO-24-1008", "M-208", "Mitsubishi M80 VMC", "2024-02-12 09:50",
       "Problem: Y axis alarm S01 0052 excessive error. Found: Y ballscrew coupling slipped. "
       "Repair: re-tightened coupling, re-set reference point. PM: check couplings yearly.",
       "", "", "", "Dave Wilson", "Closed", "", tags=("freetext",)),
    _r("SO-24-1009", "M-101", "Haas VF-2 (NGC)", "2024-02-13 10:00",
       "test", "", "test", "", "admin", "Closed", "", tags=("test_row",)),
    _r("SO-24-1010", "M-101", "Haas VF-2 (NGC)", "2024-02-13 10:01",
       "asdf", "asdf", "asdf", "", "admin", "Closed", "", tags=("test_row",)),
    _r("SO-24-1011", "M-102", "Haas VF-2 (NGC)", "2024-02-14 08:00",
       "N/A", "N/A", "N/A", "N/A", "Mike Turner", "Closed", "", tags=("placeholder",)),
    _r("SO-24-1012", "M-205", "DMG MORI CMX 1100 V (SINUMERIK 840D sl)", "2024-02-14 09:00",
       "-", "-", "-", "", "Laura Chen", "Closed", "", tags=("placeholder",)),
    _r("SO-24-1013", "", "", "", "", "", "", "", "", "", "", tags=("empty",)),
    _r("SO-24-1014", "M-206", "Mazak Integrex i-200", "2024-02-15 16:40",
       "broken", "", "fixed", "", "Dave Wilson", "Closed", "", tags=("too_short",)),
    _r("SO-24-1015", "M-310", "FANUC Robodrill a-D21MiB5 (31i-B)", "2024-02-16 08:10",
       "This is the third time, unacceptable. We need someone here TODAY.", "", "", "",
       "", "Open", "", tags=("complaint",)),
    _r("SO-24-1016", "M-311", "Okuma-style VMC (FANUC 0i-MF)", "2024-02-16 09:30",
       "+1 (414) 555-0198", "", "", "", "", "Open", "", tags=("phone_only",)),
    _r("SO-24-1017", "M-208", "Mitsubishi M80 VMC", "2024-02-19 13:20",
       "Coolant pump trips the overload after 10 minutes.",
       "Pump impeller jammed with chips, motor current 2x nominal.",
       "Cleaned impeller, replaced the pump inlet screen, current back to 1.8 A.",
       "Clean coolant tank and inlet screen monthly.",
       "Dave Wilson", "Closed",
       "Customer contact: John Miller, john.miller@example.com, cell 414-555-0147",
       tags=("expert", "pii")),
    _r("SO-24-1018", "M-207", "DMG MORI DMU 50 (Heidenhain TNC 640)", "2024-02-20 10:45",
       latin_mojibake("Spindle temperature reached 65°C, machine didn’t stop – operator’s note."),
       latin_mojibake("Chiller fan failed; the unit’s filter was clogged."),
       latin_mojibake("Replaced chiller fan, cleaned filter, spindle stable at 28°C."),
       "",
       latin_mojibake("René Dubois"), "Closed", latin_mojibake("Pièce de rechange commandée"),
       tags=("usable", "mojibake_latin")),
    _r("SO-24-1019", "M-310", "FANUC Robodrill a-D21MiB5 (31i-B)", "2024-02-21 11:00",
       "Tool change fault, sequence as follows:\n1) spindle orients, ATC arm moves in,\n"
       "2) arm stops, \"ATC timeout\" shown",
       "Orientation position drifted, parameter 4077 no longer matches the arm.",
       "Re-taught orientation with parameter 4077, 200 tool changes without fault.",
       "Back up parameters after every adjustment.",
       "Raj Patel", "Closed", "Parts: none, labor 2.5 h, travel 1 h", tags=("expert",
       "quoted_multiline", "code_context")),
    _r("SO-24-1020", "M-311", "Okuma-style VMC (FANUC 0i-MF)", "2024-02-22 14:30",
       "Ｘ axis alarm ＳＶ０４０１ V-READY OFF after emergency stop.",
       "MCC contactor in the amplifier supply worn, contact resistance high.",
       "Replaced MCC contactor, checked A06B-6117-H105 amplifier status LED, alarm cleared.",
       "Replace MCC contactors every 5 years.",
       "Raj Patel", "Closed", "", tags=("expert", "fullwidth_code", "code_context")),
    _r("SO-24-1021", "M-205", "DMG MORI CMX 1100 V (SINUMERIK 840D sl)", "2024-02-23 09:15",
       "Alarm 700016 coolant level low although tank is full.",
       "Float switch stuck.",
       "Cleaned float switch, checked PLC input, alarm cleared.",
       "",
       "Laura Chen", "Closed", "", tags=("usable",)),
    _r("SO-24-1022", "M-205", "DMG MORI CMX 1100 V (SINUMERIK 840D sl)", "2024-02-23 09:15",
       "Alarm 700017 coolant level low although tank is full.",
       "Float switch stuck.",
       "Cleaned float switch, checked PLC input, alarm cleared.",
       "",
       "Laura Chen", "Closed", "", tags=("usable", "code_differs"), of="SO-24-1021"),
    _r("SO-24-1023", "M-101", "Haas VF-2 (NGC)", "2024-02-26 08:30",
       "Alarm 108 X SERVO OVERLOAD during rapid moves, machine stops every few hours",
       "X-axis way lube starved: lube pump pressure switch failed, axis drag raised motor load.",
       "Replaced lube pump assembly, flushed X-axis lines and metering units; 4h dry run with "
       "load meter at 30-35%.",
       "Check lube reservoir level at every shift start; never bypass the low-lube alarm.",
       "M. Turner", "Closed", "re-entered", tags=("expert", "near_dup"), of="SO-24-1001"),
    _r("SO-24-1024", "M-206", "Mazak Integrex i-200", "2024-02-27 10:15",
       "Turret does not index, stops between stations.",
       "",
       "Replaced the turret clamp proximity switch and adjusted the gap to 1 mm.",
       "",
       "Dave Wilson", "Closed", "", tags=("sym_action", "exact_dup"), of="SO-24-1004"),
    _r("SO-24-1025", "M-312", "Haas ST-20 (NGC)", "2024-02-28 13:40",
       "Hydraulic chuck pressure low alarm, parts slipping.", "",
       "Adjusted hydraulic unit pressure to 300 psi, replaced return filter.", "",
       "Mike Turner", "Closed", "", tags=("sym_action",)),
    _r("SO-24-1026", "M-313", "Mazak VCN-530C", "2024-03-01 09:05",
       "Chip conveyor motor stalls, belt jammed with long stringy chips.", "",
       "Cleared belt, adjusted tension, added chip breaker recommendation to the program.", "",
       "Dave Wilson", "Closed", "", tags=("sym_action",)),
    _r("SO-24-1027", "M-207", "DMG MORI DMU 50 (Heidenhain TNC 640)", "2024-03-04 11:20",
       "Door interlock fault, cycle start blocked.", "Door lock solenoid burnt.",
       "Replaced door lock (24 V DC) and tested safety circuit.",
       "Keep spare door locks in stock.", "Laura Chen", "Closed", "", tags=("expert",)),
    _r("SO-24-1028", "M-310", "FANUC Robodrill a-D21MiB5 (31i-B)", "2024-03-05 15:50",
       "SP9031 spindle alarm during rigid tapping M8.",
       "Spindle position coder gain too low after a parameter restore (parameter 4065).",
       "Restored the spindle parameters from the 2024-01-10 backup, tapping ok.",
       "Keep dated parameter backups on the network share.",
       "Raj Patel", "Closed", "", tags=("expert", "code_context")),
    _r("SO-24-1029", "M-208", "Mitsubishi M80 VMC", "2024-03-06 08:40",
       "Y03 0001 amplifier not equipped after replacing the power supply.",
       "Rotary switch on the new drive unit set to the wrong axis number.",
       "Set the axis number switch to 1, power cycled, alarm cleared.",
       "Photograph switch settings before swapping drives.",
       "Dave Wilson", "Closed", "", tags=("expert",)),
    _r("SO-24-1030", "M-102", "Haas VF-2 (NGC)", "2024-03-07 10:10",
       "Spindle fan noisy.", "", "Replaced spindle fan.", "", "Mike Turner", "Closed", "",
       tags=("sym_action",)),
    _r("SO-24-1031", "M-311", "Okuma-style VMC (FANUC 0i-MF)", "2024-03-08 13:00",
       "PS0090 reference return incomplete on Y after the battery change.",
       "Absolute encoder position lost while the control was off.",
       "Set Y reference with parameter 1815#4, verified with a dial indicator.",
       "Change encoder batteries with power ON, once a year.",
       "Raj Patel", "Closed", "", tags=("expert", "code_context")),
    _r("SO-24-1032", "M-312", "Haas ST-20 (NGC)", "2024-03-11 09:25",
       "Operator says the machine is 'acting weird' again, please call back 414.555.0123",
       "", "", "", "", "Open", "", tags=("complaint", "pii")),
    _r("SO-24-1033", "M-206", "Mazak Integrex i-200", "2024-03-12 14:05",
       "Symptom: milling spindle overheats. Diagnosis: chiller flow switch clogged. Action: "
       "cleaned flow switch and strainer. Prevention: add strainer cleaning to the monthly PM.",
       "", "", "", "Dave Wilson", "Closed", "", tags=("freetext",)),
    _r("SO-24-1034", "M-313", "Mazak VCN-530C", "2024-03-13 08:55",
       "Way cover damaged on Y axis, scraping noise.", "Chip packed under the telescopic cover.",
       "Replaced two cover sections, installed wipers.", "Daily chip removal around covers.",
       "Dave Wilson", "Closed", "", tags=("expert",)),
    _r("SO-24-1035", "M-101", "Haas VF-2 (NGC)", "2024-03-14 10:35",
       "Alarm 103 X SERVO ERROR TOO LARGE when cutting deep pockets.",
       "Ballscrew nut preload lost, backlash 0.04 mm.",
       "Replaced X ballscrew and nut, backlash 0.003 mm, ballbar test passed.",
       "Ballbar test every 6 months.", "Mike Turner", "Closed", "", tags=("expert",)),
    _r("SO-24-1036", "M-205", "DMG MORI CMX 1100 V (SINUMERIK 840D sl)", "2024-03-15 16:20",
       "Alarm 25050 contour monitoring axis X at high feed.",
       "Servo gain MD32200 raised by a previous tech without retuning.",
       "Restored MD32200 to the commissioning value, ran circularity test, ok.",
       "Lock machine data changes behind the manufacturer password.",
       "Laura Chen", "Closed", "", tags=("expert", "code_context")),
    _r("SO-24-1037", "M-208", "Mitsubishi M80 VMC", "2024-03-18 09:00",
       "Tool unclamp slow.", "", "Cleaned air filter regulator, raised air to 0.6 MPa.", "",
       "Dave Wilson", "Closed", "", tags=("sym_action",)),
    _r("SO-24-1038", "M-207", "DMG MORI DMU 50 (Heidenhain TNC 640)", "2024-03-19 13:45",
       "Probe TS 460 does not trigger, error on probing cycle 431.",
       "Probe battery empty.", "Replaced probe battery, calibrated probe radius.",
       "Replace probe batteries every 6 months.", "Laura Chen", "Closed", "", tags=("expert",)),
    _r("SO-24-1039", "M-310", "FANUC Robodrill a-D21MiB5 (31i-B)", "2024-03-20 08:15",
       "SV0436 soft thermal (OVC) on Z axis after about 40 min of tapping cycles!!",
       "Z-axis counterbalance gas spring lost pressure, motor carries the full head weight.",
       "Replaced the gas spring, checked parameter 2021 and load meter, Z load back to 25%. "
       "Machine returned to production.",
       "Log Z-axis load weekly to catch balance loss early.",
       "Raj Patel", "Closed", "", tags=("expert", "near_dup"), of="SO-24-1005"),
    _r("SO-24-1040", "M-311", "Okuma-style VMC (FANUC 0i-MF)", "2024-03-21 11:30",
       "Way lube alarm, low level.", "", "Filled way lube (ISO VG 68), no leaks.", "",
       "Raj Patel", "Closed", "", tags=("sym_action",)),
]
EN_MALFORMED_AFTER = "SO-24-1026"
EN_MALFORMED = Row(
    ("SO-24-1026B",),
    tags=("malformed",),
    raw="SO-24-1026B,M-313,Mazak VCN-530C,2024-03-01 09:30,Chip conveyor stalls again,"
    "Closed",
)

# ---------------------------------------------------------------- 工单导出_merged.xlsx
_D = dt.datetime


def _x(order: str, asset: str, model: str, when: dt.datetime, *rest: str, tags=(), of=""):
    assert len(rest) == 7, rest
    return Row((order, asset, model, "", *rest), tuple(tags), of, when=when)


XLSX_ROWS: list[Row] = [
    _x("GD-0301", "JG-A-01", "沈阳机床 VMC850E（FANUC 0i-MF）", _D(2024, 4, 1, 8, 30),
       "X轴报警SV0401，伺服未准备好。", "伺服放大器风扇堵转，放大器过热保护。",
       "更换放大器风扇，清理电柜。", "电柜滤网每月清洗。", "张伟", "已完成", ""),
    _x("GD-0302", "", "", _D(2024, 4, 3, 9, 0),
       "冷却泵不出水，泵体发热。", "冷却泵叶轮被铁屑卡死。", "拆泵清理叶轮，更换进水滤网。",
       "每月清理水箱。", "张伟", "已完成", "", tags=("merged_blank",)),
    _x("GD-0303", "", "", _D(2024, 4, 8, 10, 15),
       "主轴换刀时有撞击声。", "", "调整主轴定向角度（参数4077），换刀正常。", "",
       "李强", "已完成", "", tags=("merged_blank", "code_context")),
    _x("GD-0304", "JG-A-02", "DMG MORI DMU 50（Heidenhain TNC 640）", _D(2024, 4, 9, 13, 20),
       "B轴回零偏差大，重复回零结果不一致。", "B轴零点开关挡块松动。",
       "紧固挡块并重新标定B轴零点。", "", "陈浩", "已完成", ""),
    _x("GD-0305", "", "", _D(2024, 4, 12, 15, 5),
       "主轴升速至8000rpm时报错8B40。", "主轴编码器插头氧化。", "清洁插头，更换屏蔽电缆。",
       "编码器电缆远离动力线。", "陈浩", "已完成", "", tags=("merged_blank",)),
    _x("GD-0306", "", "", _D(2024, 4, 15, 9, 40),
       "同上", "", "", "", "陈浩", "已完成", "", tags=("merged_blank", "placeholder")),
    _x("GD-0307", "JG-B-05", "沈阳机床 VMC0850B（SINUMERIK 828D）", _D(2024, 4, 16, 8, 10),
       "报警25040静止监控Z轴。", "Z轴抱闸释放慢。", "更换抱闸整流模块。", "抱闸动作纳入月检。",
       "李强", "已完成", ""),
    _x("GD-0308", "", "", _D(2024, 4, 18, 10, 50),
       "润滑泵报警，导轨油位低。", "", "补充68#导轨油。", "", "李强", "已完成", "",
       tags=("merged_blank", "sym_action")),
    _x("GD-0309", "", "", _D(2024, 4, 19, 11, 30),
       "测试", "", "", "", "admin", "已关闭", "", tags=("merged_blank", "test_row")),
    _x("GD-0310", "", "", _D(2024, 4, 22, 14, 0),
       "报警700016冷却液液位低，实际液位正常。", "液位开关浮球卡住。", "清理浮球开关。",
       "每周清理水箱。", "李强", "已完成", "", tags=("merged_blank",)),
    _x("GD-0311", "JG-B-06", "Haas VF-2", _D(2024, 4, 23, 9, 15),
       "Alarm 108 X SERVO OVERLOAD 反复出现。", "X轴导轨润滑不足。", "更换润滑泵并疏通油路。",
       "每日检查润滑油位。", "赵敏", "已完成", ""),
    _x("GD-0312", "", "", _D(2024, 4, 24, 16, 45),
       "怎么又坏了！！催了三天了", "", "", "", "", "处理中", "",
       tags=("merged_blank", "complaint")),
    _x("GD-0313", "", "", _D(2024, 4, 25, 8, 5),
       "主轴报Alarm 108 X SERVO OVERLOAD反复出现", "X轴导轨润滑不足", "更换润滑泵并疏通油路",
       "每日检查润滑油位", "赵敏", "已完成", "补录", tags=("merged_blank", "near_dup"),
       of="GD-0311"),
    _x("GD-0314", "JG-C-09", "友嘉 FV-1000A（三菱 M80）", _D(2024, 4, 26, 10, 20),
       "Z轴报警S01 0052过大误差。", "Z轴抱闸线圈烧坏。", "更换抱闸，调整防落参数。",
       "抱闸电源月度点检。", "孙涛", "已完成", ""),
    _x("GD-0315", "", "", _D(2024, 4, 29, 13, 35),
       "刀库刀套不翻转。", "", "更换刀套气缸电磁阀。", "", "孙涛", "已完成", "",
       tags=("merged_blank", "sym_action")),
    _x("GD-0316", "", "", _D(2024, 5, 6, 9, 55),
       "1111", "", "", "", "孙涛", "已关闭", "", tags=("merged_blank", "placeholder")),
    _x("GD-0317", "JG-C-10", "牧野 a61nx（FANUC 31i-B）", _D(2024, 5, 7, 8, 45),
       "主轴报警ＳＰ９００１，电机过热。", "主轴电机风扇卡死。",
       "更换风扇（A90L-0001-0538/R），连续运行3小时正常。", "每月检查风扇。", "周杰", "已完成", "",
       tags=("fullwidth_code", "code_context")),
    _x("GD-0318", "", "", _D(2024, 5, 9, 14, 10),
       "APC托盘交换不到位。", "托盘定位销磨损。", "更换定位销和衬套。", "每季度检查定位销。",
       "周杰", "已完成", "联系电话 13700137000", tags=("merged_blank", "pii")),
    _x("GD-0319", "", "", _D(2024, 5, 13, 10, 0),
       "工作台交换（APC）时报警，托盘定位不到位。", "托盘定位销磨损。", "更换定位销和衬套。",
       "每季度检查定位销。", "周杰", "已完成", "", tags=("merged_blank", "near_dup"),
       of="GD-0318"),
    _x("GD-0320", "JG-D-12", "DMG MORI DMU 65 monoBLOCK（SINUMERIK 840D sl）",
       _D(2024, 5, 14, 8, 20),
       "现象：A轴转台夹紧报警700203。原因：夹紧电磁阀线圈烧坏。处理：更换线圈。建议：备件常备。",
       "", "", "", "吴昊", "已完成", "", tags=("freetext",)),
    _x("GD-0321", "", "", _D(2024, 5, 16, 11, 15),
       "报警25201驱动故障Z轴。", "抱闸继电器触点粘连。", "更换抱闸继电器。", "继电器按寿命更换。",
       "吴昊", "已完成", "", tags=("merged_blank",)),
    _x("GD-0322", "", "", _D(2024, 5, 17, 15, 30),
       "无", "无", "无", "无", "吴昊", "已关闭", "", tags=("merged_blank", "placeholder")),
    _x("GD-0323", "JG-D-13", "Mazak VCN-530C", _D(2024, 5, 20, 9, 5),
       "排屑器过载停机。", "", "清理卡住的铁屑，调整链条。", "", "王磊", "已完成", "",
       tags=("sym_action",)),
    _x("GD-0324", "", "", _D(2024, 5, 21, 13, 50),
       "防护门无法关闭到位。", "门导轨有铁屑。", "清理门导轨，调整门锁位置。", "每班清理门导轨。",
       "王磊", "已完成", "", tags=("merged_blank",)),
    _x("GD-0325", "JG-E-15", "大连机床 CKA6150（FANUC 0i-TF）", _D(2024, 5, 22, 8, 40),
       "液压卡盘夹不紧。", "减压阀卡滞。", "拆洗减压阀，换液压油。", "每年换液压油。",
       "刘洋", "已完成", ""),
    _x("GD-0326", "", "", _D(2024, 5, 24, 10, 25),
       "刀塔换刀不到位，报警ＡＬＭ１００１。", "刀塔锁紧开关松动。", "紧固并调整锁紧开关。", "",
       "刘洋", "已完成", "", tags=("merged_blank", "fullwidth_code")),
    _x("GD-0327", "", "", _D(2024, 5, 27, 14, 45),
       "尾座套筒伸出无力。", "", "更换尾座油缸密封。", "", "刘洋", "已完成", "",
       tags=("merged_blank", "sym_action")),
    _x("GD-0328", "", "", _D(2024, 5, 28, 9, 35),
       "", "", "", "", "", "", "", tags=("merged_blank", "empty")),
    _x("GD-0329", "JG-E-16", "Haas VF-2", _D(2024, 5, 29, 11, 0),
       "报警Alarm 161，伺服驱动故障，轴无法使能。", "动力线绝缘低。", "更换动力电缆。",
       "拖链电缆定期检查。", "赵敏", "已完成", ""),
    _x("GD-0330", "", "", _D(2024, 5, 31, 16, 20),
       "报警Alarm 162，伺服驱动故障，轴无法使能。", "动力线绝缘低。", "更换动力电缆。",
       "拖链电缆定期检查。", "赵敏", "已完成", "", tags=("merged_blank", "code_differs"),
       of="GD-0329"),
]

# ---------------------------------------------------------------- gb18030_extra.csv
GB_ROWS: list[Row] = [
    _r("WX2024-0901", "CNC-25", FANUC_VMC, "2024-04-03 09:00",
       "X轴报警SV0436软过热，重切削约30分钟后出现。", "X轴导轨防护罩卡铁屑，阻力增大。",
       "清理并修复防护罩，负载率恢复到40%以下。", "每班清理防护罩铁屑。",
       "刘䶮", "已完成", "维修人员刘䶮（䶮字需GB18030）", tags=("expert", "gb18030_only")),
    _r("WX2024-0902", "CNC-26", SY_828, "2024-04-05 10:30",
       "主轴换挡不到位，报警700120。", "换挡电磁阀阀芯卡滞。", "清洗电磁阀，换挡恢复正常。", "",
       "陈㐀", "已完成", "备注：供应商联系人为𠀀先生", tags=("usable", "gb18030_only")),
    _r("WX2024-0903", "CNC-27", M80, "2024-04-08 14:15",
       "刀库计数错乱，调刀号与实际不符。", "刀库计数开关信号抖动。",
       "更换计数开关，重新初始化刀库。", "每月检查刀库开关。",
       "张伟", "已完成", "㐀𠀀 罕用字测试", tags=("expert", "gb18030_only")),
    _r("WX2024-0904", "CNC-28", DL_LATHE, "2024-04-10 08:20",
       "主轴编码器报警，主轴定向失败。", "", "更换主轴编码器连接线。", "", "王磊", "已完成", "",
       tags=("sym_action",)),
    _r("WX2024-0905", "CNC-29", DMU50, "2024-04-12 11:40",
       "冷却液喷嘴堵塞，刀具磨损快。", "切削液浓度过高，析出物堵塞喷嘴。",
       "清理喷嘴，调整切削液浓度到6%。", "每周检测切削液浓度。", "周𬌗", "已完成", "",
       tags=("expert", "gb18030_only")),
]


# fmt: on

# ---------------------------------------------------------------- writers


def _csv_text(
    header: tuple[str, ...],
    rows: list[Row],
    file: str,
    newline: str,
    malformed: tuple[str, Row] | None = None,
) -> tuple[str, list[Placed]]:
    """CSV text of the rows and where each record starts (1-based physical line)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator=newline, quoting=csv.QUOTE_MINIMAL)
    writer.writerow(header)
    placed: list[Placed] = []
    for row in rows:
        line = buf.getvalue().count("\n") + 1
        writer.writerow(row.fields)
        placed.append(Placed(file, line, row.fields[0], row.tags, row.of))
        if malformed is not None and row.fields[0] == malformed[0]:
            bad = malformed[1]
            line = buf.getvalue().count("\n") + 1
            assert bad.raw is not None
            buf.write(bad.raw + newline)
            placed.append(Placed(file, line, bad.fields[0], bad.tags, bad.of))
    return buf.getvalue(), placed


def _write_xlsx(path: Path, rows: list[Row]) -> list[Placed]:
    """XLSX with real merged cells for 设备编号/机床型号 groups; returns sheet rows."""
    wb = xlsxwriter.Workbook(str(path), {"strings_to_numbers": False})
    wb.set_properties({"created": dt.datetime(2024, 6, 1, 8, 0, 0), "author": "设备科"})
    ws = wb.add_worksheet("维修记录")
    head = wb.add_format({"bold": True, "bg_color": "#DDEBF7", "border": 1})
    cell = wb.add_format({"text_wrap": True, "valign": "top", "border": 1})
    merged = wb.add_format({"valign": "vcenter", "border": 1})
    date = wb.add_format({"num_format": "yyyy-mm-dd hh:mm", "valign": "top", "border": 1})
    ws.write_row(0, 0, XLSX_HEADER, head)
    placed: list[Placed] = []
    for i, row in enumerate(rows, start=1):
        for col, value in enumerate(row.fields):
            if col == 3:
                assert row.when is not None
                ws.write_datetime(i, col, row.when, date)
            elif col in (1, 2):
                continue
            else:
                ws.write(i, col, value or None, cell)
        placed.append(Placed(XLSX, i + 1, row.fields[0], row.tags, row.of))
    # merge each asset group (a row with an asset, then rows with blanks)
    starts = [i for i, row in enumerate(rows) if row.fields[1]]
    for k, start in enumerate(starts):
        end = (starts[k + 1] if k + 1 < len(starts) else len(rows)) - 1
        for col in (1, 2):
            value = rows[start].fields[col]
            if end > start:
                ws.merge_range(start + 1, col, end + 1, col, value, merged)
            else:
                ws.write_string(start + 1, col, value, merged)
    ws.set_column(0, 3, 16)
    ws.set_column(4, 8, 36)
    ws.freeze_panes(1, 0)
    wb.close()
    return placed


def _resolve(placed: list[Placed]) -> list[Placed]:
    by_id = {(p.file, p.order_id): p.line for p in placed}
    for p in placed:
        if p.of:
            p.of_line = by_id[(p.file, p.of)]
    return placed


def write_samples(out_dir: Path = OUT_DIR) -> list[Placed]:
    """Write the four sample files and README.md into out_dir; return the record index."""
    out_dir.mkdir(parents=True, exist_ok=True)
    placed: list[Placed] = []

    text, p = _csv_text(ZH_HEADER, ZH_ROWS, ZH_CSV, "\r\n", (ZH_MALFORMED_AFTER, ZH_MALFORMED))
    (out_dir / ZH_CSV).write_bytes(text.encode("gbk"))
    placed += p

    text, p = _csv_text(EN_HEADER, EN_ROWS, EN_CSV, "\n", (EN_MALFORMED_AFTER, EN_MALFORMED))
    (out_dir / EN_CSV).write_bytes(text.encode("utf-8-sig"))
    placed += p

    placed += _write_xlsx(out_dir / XLSX, XLSX_ROWS)

    text, p = _csv_text(ZH_HEADER, GB_ROWS, GB18030_CSV, "\r\n")
    (out_dir / GB18030_CSV).write_bytes(text.encode("gb18030"))
    placed += p

    placed = _resolve(placed)
    (out_dir / "README.md").write_text(_readme(placed), encoding="utf-8")
    return placed


def sample_index() -> pl.DataFrame:
    """One row per hand-written record: file, line (CSV) / sheet row (XLSX), order_id, tags,
    `of` (order id it duplicates or pairs with) and `of_line`. Nothing is written."""
    placed: list[Placed] = []
    placed += _csv_text(ZH_HEADER, ZH_ROWS, ZH_CSV, "\r\n", (ZH_MALFORMED_AFTER, ZH_MALFORMED))[1]
    placed += _csv_text(EN_HEADER, EN_ROWS, EN_CSV, "\n", (EN_MALFORMED_AFTER, EN_MALFORMED))[1]
    placed += [Placed(XLSX, i + 2, r.fields[0], r.tags, r.of) for i, r in enumerate(XLSX_ROWS)]
    placed += _csv_text(ZH_HEADER, GB_ROWS, GB18030_CSV, "\r\n")[1]
    placed = _resolve(placed)
    return pl.DataFrame(
        {
            "file": [p.file for p in placed],
            "line": [p.line for p in placed],
            "order_id": [p.order_id for p in placed],
            "tags": [list(p.tags) for p in placed],
            "of": [p.of or None for p in placed],
            "of_line": [p.of_line for p in placed],
        },
        schema={
            "file": pl.String,
            "line": pl.Int64,
            "order_id": pl.String,
            "tags": pl.List(pl.String),
            "of": pl.String,
            "of_line": pl.Int64,
        },
    )


_README_HEAD = """\
# Sample work-order exports

Hand-written for this project by `python -m sample_data.make_samples` (edit the script, not
these files; the output is byte-stable). A fictional maintenance shop with FANUC 0i-MF/0i-TF/
31i-B, SINUMERIK 828D/840D sl, Mitsubishi M80, Heidenhain TNC 640, Haas NGC and Mazatrol
machines. `sample_data.make_samples.sample_index()` returns the table below as a DataFrame.

| file | encoding | header | records | notes |
| --- | --- | --- | --- | --- |
"""

_README_LINES = """
Line numbers: for CSV, the 1-based physical line where the record starts (line 1 is the
header; quoted newlines make later records start further down); for XLSX, the 1-based sheet
row (row 1 is the header). `of` names the record (and its line) that a duplicate repeats or
that a hard negative is paired with.

## Tags

"""


def _readme(placed: list[Placed]) -> str:
    files = [
        (ZH_CSV, "GBK", "Chinese (工单号, 故障现象, 原因分析, 处理措施, 预防措施, …)", "CRLF"),
        (EN_CSV, "UTF-8 with BOM", "English (Order No, Problem Description, Cause, …)", "LF"),
        (
            XLSX,
            "XLSX",
            "Chinese variants (工单编号, 报修日期, 故障描述, 故障原因, 维修措施, 预防建议)",
            "sheet 维修记录; 设备编号/机床型号 merged over groups: fill down",
        ),
        (GB18030_CSV, "GB18030 (not decodable as GBK)", "Chinese, as the GBK file", "CRLF"),
    ]
    out = [_README_HEAD]
    for name, enc, header, note in files:
        n = sum(1 for p in placed if p.file == name)
        out.append(f"| `{name}` | {enc} | {header} | {n} | {note} |\n")
    out.append(_README_LINES)
    for tag, meaning in TAGS.items():
        out.append(f"- `{tag}`: {meaning}\n")
    for name, *_ in files:
        out.append(f"\n## `{name}`\n\n| line | order no | tags | of |\n| --- | --- | --- | --- |\n")
        for p in placed:
            if p.file == name:
                of = f"{p.of} (line {p.of_line})" if p.of else ""
                out.append(f"| {p.line} | {p.order_id} | {', '.join(p.tags)} | {of} |\n")
    return "".join(out)


if __name__ == "__main__":
    index = write_samples()
    print(f"wrote {len(index)} records to {OUT_DIR}")
